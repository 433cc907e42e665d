// The reader's input formats (importer.h) and what every one of them shares: which importer reads a
// source, the rank a read source becomes, and the losses it reports. Compiled for the baseline CPU
// (the Kineto importer's parser is SIMD-compiled: kineto_document.cc; the CPU check is the
// caller's, reader.cc).
//
// The rank policy, first match wins: distributedInfo.rank, else the rank the caller gives
// (ReadOptions::rank_hint for a single file, ReadTraceBuffer's rank), else digits after "rank" in
// the file name (RankInFileName, trace_names.h), else 0. Collisions (two files claiming one rank)
// move the later file to the next free rank and say so in rank_source (MoveClaimedRank). Example,
// files without distributedInfo read in this order: rank1.json -> 1 and rank0.json -> 0
// (rank_source "file name"), then notes.json -> 0 is taken, so 2 (rank_source "input order
// (collided with another file; moved)").
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "importer.h"
#include "kineto_parse.h"
#include "trainrx/profiler/journal_format.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/trace_names.h"

namespace trainrx::profiler {
namespace {

// A source whose first bytes were read to pick its importer: they are given again, then the rest.
class SniffedSource : public io::ByteSource {
 public:
  explicit SniffedSource(std::unique_ptr<io::ByteSource> inner) : inner_(std::move(inner)) {
    while (head_.size() < kSniffBytes) {
      char buf[kSniffBytes];
      const std::ptrdiff_t n = inner_->Read(buf, kSniffBytes - head_.size());
      if (n <= 0) {
        failed_ = n < 0;
        break;
      }
      head_.append(buf, static_cast<size_t>(n));
    }
    Sync();
  }
  std::string_view head() const { return head_; }
  std::ptrdiff_t Read(char* dst, size_t n) override {
    if (at_ < head_.size()) {
      const size_t k = std::min(n, head_.size() - at_);
      std::memcpy(dst, head_.data() + at_, k);
      at_ += k;
      return static_cast<std::ptrdiff_t>(k);
    }
    if (failed_) return -1;
    const std::ptrdiff_t r = inner_->Read(dst, n);
    Sync();
    return r;
  }
  uint64_t SizeHint() const override { return inner_->SizeHint(); }

 private:
  void Sync() {
    error_ = inner_->error();
    cut_short_ = inner_->cut_short();
  }
  std::unique_ptr<io::ByteSource> inner_;
  std::string head_;
  size_t at_ = 0;
  bool failed_ = false;
};

bool RecognizesAny(std::string_view) { return true; }

constexpr Importer kImporters[] = {
    // A journal is read when named (`analyze run.json.partial`); a folder scan leaves it: `record`
    // makes a killed process's journal into its trace, and one it could not is kept beside it.
    {"trainrx journal", RecognizesJournal, ReadJournalSource, {}},
    // Kineto / Chrome trace JSON, torch.profiler's and ours, every generation (reader.h):
    // last, it takes whatever no other importer recognised, and says what it expected.
    {"Kineto JSON", RecognizesAny, ParseSource, {".json", ".json.gz"}},
};

}  // namespace

std::span<const Importer> Importers() { return kImporters; }

bool ClaimedInFolder(std::string_view file_name) {
  for (const Importer& i : Importers())
    for (std::string_view suffix : i.folder_suffixes)
      if (!suffix.empty() && file_name.ends_with(suffix)) return true;
  return false;
}

std::string FolderSuffixes() {
  std::string out;
  for (const Importer& i : Importers())
    for (std::string_view suffix : i.folder_suffixes)
      if (!suffix.empty()) out += fmt::format("{}*{}", out.empty() ? "" : ", ", suffix);
  return out;
}

bool RecognizesJournal(std::string_view head) { return IsJournal(head); }

Status ReadJournalSource(io::ByteSource& src, const std::string& name, int32_t provisional_rank, Trace& trace,
                         const ReadOptions&, RankInfo* info) {
  // A journal is decoded whole (frames are checked one by one, in order); it is at most the
  // recording's size, not a JSON text of it.
  std::string bytes;
  char buf[1 << 16];
  for (std::ptrdiff_t n; (n = src.Read(buf, sizeof(buf))) != 0;) {
    if (n < 0) return Status::Error(fmt::format("{}: cannot read: {}", name, src.error()));
    bytes.append(buf, static_cast<size_t>(n));
  }
  JournalContents contents;
  if (Status st = DecodeJournal(bytes, name, &contents); !st.ok()) return st;
  trace.Append(contents.trace, provisional_rank);
  // Its records: events, counter samples, flow ends (a Kineto trace counts its JSON elements, with
  // metadata rows: the same journal written as JSON counts a few more).
  trace.stats.events_read += contents.trace.events.size() + contents.trace.counters.size() + contents.trace.flows.size();
  trace.stats.bytes_read += bytes.size();
  // What the trace the process would have written says of itself (kineto_writer.cc's header):
  // its rank as distributedInfo, Kineto's schema version, our block's schema.
  RankInfo& decoded = contents.trace.ranks[0];
  info->declared_rank = decoded.rank;
  info->world_size = decoded.world_size;
  info->backend = decoded.backend;
  info->devices = std::move(decoded.devices);
  info->base_time_ns = decoded.base_time_ns;
  info->schema_version = "1";
  info->config = std::move(decoded.config);
  info->config["schema"] = ConfigValue::String(fmt::format("{}.0", kTrainrxSchemaMajor));
  return {};
}

// The losses a source says of itself: those our collector counted while tracing (its "trainrx"
// block), and a journal's (read as it is, torn, corrupt, or made into a trace after its process was
// killed): each is data loss of this trace.
static void CountRecordedLosses(const RankInfo& info, const std::string& name, IngestStats& stats) {
  for (const char* key : {"dropped_records", "cupti_dropped_records", "unfinished_ranges"}) {
    auto it = info.config.find(key);
    if (it == info.config.end()) continue;
    const auto n = static_cast<uint64_t>(std::max<int64_t>(0, it->second.AsInt().value_or(0)));
    if (n > 0) {
      stats.Add(fmt::format("collector_{}", key),
                std::string_view(key) == "unfinished_ranges" ? IssueSeverity::kInfo : IssueSeverity::kDataLoss,
                fmt::format("{}: reported by the trainrx collector", name), n);
    }
  }
  // A journal read as it is (its process was killed with its launcher, or still runs): the last
  // flush period is missing, at most.
  if (info.config.count("journal_flush_ms") && !info.config.count("journal_salvaged")) {
    const double period_s = info.config.at("journal_flush_ms").AsNumber().value_or(0) / 1e3;
    stats.Add("journal_cut", IssueSeverity::kDataLoss,
              fmt::format("{}: a collector journal, not a finished trace (its process was killed, or is still "
                          "running): what it recorded after its last flush is missing (flushed every {:g} s)",
                          name, period_s),
              1);
  }
  // A binary journal's own losses (journal_format.h): a last flush cut off while it was written,
  // frames that did not check out.
  if (auto it = info.config.find("journal_torn_bytes"); it != info.config.end()) {
    stats.Add("journal_torn_flush", IssueSeverity::kDataLoss,
              fmt::format("{}: the journal's last flush was cut off while it was written ({} bytes): what it "
                          "held is lost, as if that flush had not run",
                          name, it->second.Text()),
              1);
  }
  if (auto it = info.config.find("journal_corrupt_frames"); it != info.config.end()) {
    const auto bytes = info.config.find("journal_corrupt_bytes");
    stats.Add("journal_corrupt_frames", IssueSeverity::kDataLoss,
              fmt::format("{}: journal flushes whose bytes did not check out were skipped ({} bytes)", name,
                          bytes == info.config.end() ? "?" : bytes->second.Text()),
              static_cast<uint64_t>(std::max<int64_t>(0, it->second.AsInt().value_or(0))));
  }
  // A trace made from a killed process's journal: what it recorded after its last flush is lost.
  if (auto it = info.config.find("journal_missing_ns"); it != info.config.end()) {
    const double missing_s = it->second.AsNumber().value_or(0) / 1e9;
    stats.Add("journal_cut", IssueSeverity::kDataLoss,
              fmt::format("{}: made from the journal of a process that was killed; up to {:.1f} s recorded "
                          "before it ended were never flushed",
                          name, missing_s),
              1);
  }
}

Status ReadOneSource(std::unique_ptr<io::ByteSource> raw, const std::string& name, int32_t rank_hint, Trace& trace,
                     const ReadOptions& options) {
  SniffedSource src(std::move(raw));
  const Importer* importer = &Importers().back();
  for (const Importer& i : Importers())
    if (i.recognizes(src.head())) {
      importer = &i;
      break;
    }
  // Tracks are keyed by rank, so the source is read under a rank no file can have until its
  // distributedInfo (in a Kineto trace, the trailer after the events) is known, then remapped.
  constexpr int32_t kProvisional = -1000000;
  RankInfo info;
  if (auto st = importer->read(src, name, kProvisional, trace, options, &info); !st.ok()) return st;
  auto taken = [&](int32_t r) { return trace.FindRank(r) != nullptr; };
  int32_t rank = -1;
  std::string how;
  if (info.declared_rank >= 0) {
    rank = info.declared_rank;
    how = "distributedInfo";
  } else if (rank_hint >= 0) {
    rank = rank_hint;
    how = "given";
  } else if (int32_t fr = RankInFileName(name); fr >= 0) {
    rank = fr;
    how = "file name";
  } else {
    rank = 0;
    how = "input order";
  }
  MoveClaimedRank(&rank, &how, taken);
  info.rank = rank;
  info.source = name;
  info.rank_source = how;
  info.job = info.declared_rank >= 0
                 ? fmt::format("world_size {}{}", info.world_size, info.backend.empty() ? "" : ", " + info.backend)
                 : "no distributedInfo";
  CountRecordedLosses(info, name, trace.stats);
  trace.ranks.push_back(std::move(info));
  trace.RemapRank(kProvisional, rank);
  return {};
}

}  // namespace trainrx::profiler
