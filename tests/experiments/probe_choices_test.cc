// `record`'s probe choices (experiments/record.h ProbeChoices): which other probes the preload shim
// may attach, read from their sidecars. A temporary tree stands for a checkout and a user's cache.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "trainrx/experiments/record.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

class ProbeChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("trainrx_probe_choices_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // A probe directory: the library (empty: never loaded here) and, when `lib` is given, its sidecar.
  fs::path Probe(const fs::path& dir, const std::string& lib) {
    fs::create_directories(dir);
    std::ofstream(dir / "libtrainrx_probe.so") << "";
    if (!lib.empty()) std::ofstream(dir / "libtrainrx_probe.torch") << "lib=" << lib << "\nversion=x\n";
    return dir;
  }
  fs::path root_;
};

TEST_F(ProbeChoicesTest, ListsBuildCompatThenTheCacheInNameOrder) {
  const fs::path build = Probe(root_ / "build", "/venv/torch/lib/libtorch_cpu.so");
  Probe(root_ / "build-compat", "/usr/lib/libtorch_cpu.so.1.13");
  Probe(root_ / "cache" / "probe-2.14.1", "/conda/torch/lib/libtorch_cpu.so");
  Probe(root_ / "cache" / "probe-2.12.0", "/other/libtorch_cpu.so");
  const std::string got = ProbeChoices(build.string(), build.string(), (root_ / "cache").string());
  EXPECT_EQ(got, "/usr/lib/libtorch_cpu.so.1.13\t" + (root_ / "build-compat").string() + "\n" +
                     "/other/libtorch_cpu.so\t" + (root_ / "cache" / "probe-2.12.0").string() + "\n" +
                     "/conda/torch/lib/libtorch_cpu.so\t" + (root_ / "cache" / "probe-2.14.1").string() + "\n");
}

TEST_F(ProbeChoicesTest, LeavesOutThePrimaryAndDirectoriesWithoutProbeOrSidecar) {
  const fs::path build = Probe(root_ / "build", "/venv/libtorch_cpu.so");
  const fs::path compat = Probe(root_ / "build-compat", "/usr/lib/libtorch_cpu.so.1.13");
  Probe(root_ / "cache" / "probe-nosidecar", "");                   // a build that failed half-way
  fs::create_directories(root_ / "cache" / "probe-empty");           // no library
  Probe(root_ / "cache" / "not-a-probe", "/x/libtorch_cpu.so");      // not named probe-*
  // The primary is build-compat itself (record --probe-dir build-compat): nothing else qualifies.
  EXPECT_EQ(ProbeChoices(compat.string(), build.string(), (root_ / "cache").string()), "");
  // A missing cache and no build-compat: no choices.
  fs::remove_all(compat);
  EXPECT_EQ(ProbeChoices(build.string(), build.string(), (root_ / "nowhere").string()), "");
  EXPECT_EQ(ProbeChoices(build.string(), build.string(), ""), "");
}

TEST_F(ProbeChoicesTest, CacheDirFollowsXdgThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = xdg ? xdg : "";
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(ProbeCacheDir(), "/xdg/trainrx");
  unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (home && *home) {
    EXPECT_EQ(ProbeCacheDir(), std::string(home) + "/.cache/trainrx");
  }
  if (xdg) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace trainrx::experiments
