// The C API's codes (api/include/trainrx/c_api.h, api/status_code.h): 0 done, 2 for input the
// caller gave that is wrong, 70 for a bug in trainrx, each with its message in *error. Through the
// exported functions where an input reaches the code (a missing file, a bad format, a NULL
// argument), and through status_code.h's SetError (the one mapping c_api.cc uses) for each
// ErrorKind: a changed code fails this test (python/trainrx raises TrainrxError with it).
#include "trainrx/c_api.h"

#include <gtest/gtest.h>

#include <string>

#include "status_code.h"

namespace {

// *error as a string, freed.
std::string Take(char* error) {
  std::string s = error ? error : "";
  trainrx_string_free(error);
  return s;
}

TEST(CApiTest, AMissingTraceIsInvalidInputTwo) {
  const char* paths[] = {"/nonexistent/trainrx_c_api_test.json"};
  trainrx_analysis* a = nullptr;
  char* error = nullptr;
  EXPECT_EQ(trainrx_analyze(paths, 1, nullptr, 0, nullptr, 0, &a, &error), 2);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(Take(error), "/nonexistent/trainrx_c_api_test.json: no such file or directory");
}

TEST(CApiTest, AnUnknownThresholdIsInvalidInputTwo) {
  const char* paths[] = {TRAINRX_SOURCE_DIR "/examples/sample_cpu_training.json.gz"};
  const char* thresholds[] = {"nope=1"};
  trainrx_analysis* a = nullptr;
  char* error = nullptr;
  EXPECT_EQ(trainrx_analyze(paths, 1, thresholds, 1, nullptr, 0, &a, &error), 2);
  EXPECT_NE(Take(error).find("nope"), std::string::npos);
}

TEST(CApiTest, ABadFormatIsTwoAndAGoodRenderIsZero) {
  const char* paths[] = {TRAINRX_SOURCE_DIR "/examples/sample_cpu_training.json.gz"};
  trainrx_analysis* a = nullptr;
  char* error = nullptr;
  ASSERT_EQ(trainrx_analyze(paths, 1, nullptr, 0, nullptr, 0, &a, &error), 0) << Take(error);
  char* out = nullptr;
  size_t size = 0;
  EXPECT_EQ(trainrx_render(a, "xml", &out, &size, &error), 2);
  EXPECT_EQ(Take(error), "format must be text, json, md or html, not 'xml'");
  EXPECT_EQ(trainrx_render(a, "json", &out, &size, &error), 0);
  EXPECT_GT(size, 0u);
  trainrx_string_free(out);
  trainrx_analysis_free(a);
}

// Issue 53's calls: the set seam trainrx.dask uses and the export, with the same codes.
TEST(CApiTest, TheSeamAndTheExportGiveTheSameCodes) {
  char* out = nullptr;
  size_t size = 0;
  char* error = nullptr;
  const char* missing[] = {"/nonexistent/set"};
  EXPECT_EQ(trainrx_expand_paths(missing, 1, &out, &size, &error), 2);
  EXPECT_EQ(Take(error), "/nonexistent/set: no such file or directory");
  const char* dir[] = {TRAINRX_SOURCE_DIR "/tests/fixtures/dlrm_8ranks"};
  ASSERT_EQ(trainrx_expand_paths(dir, 1, &out, &size, &error), 0) << Take(error);
  const std::string files = Take(out);
  EXPECT_EQ(files.front(), '[');
  EXPECT_NE(files.find("worker7_step_12"), std::string::npos);
  // One file's sides, then the reduce; a document that is not one is the caller's input: 2.
  const char* file = TRAINRX_SOURCE_DIR "/tests/fixtures/dlrm_8ranks/worker0_step_12.1694128201545.pt.trace.json.gz";
  ASSERT_EQ(trainrx_file_sides(file, nullptr, 0, nullptr, &out, &size, &error), 0) << Take(error);
  const std::string doc = Take(out);
  EXPECT_NE(doc.find("\"schema\":\"trainrx.file_sides/1\""), std::string::npos);
  const char* files1[] = {file};
  const char* docs[] = {doc.c_str()};
  trainrx_analysis* a = nullptr;
  ASSERT_EQ(trainrx_analyze_file_sides(files1, 1, files1, docs, 1, nullptr, 0, nullptr, 0, &a, &error), 0) << Take(error);
  trainrx_analysis_free(a);
  const char* bad[] = {"{}"};
  EXPECT_EQ(trainrx_analyze_file_sides(files1, 1, files1, bad, 1, nullptr, 0, nullptr, 0, &a, &error), 2);
  EXPECT_NE(Take(error).find("field 'schema'"), std::string::npos);
  EXPECT_EQ(trainrx_file_sides("/nonexistent/x.json", nullptr, 0, nullptr, &out, &size, &error), 2);
  Take(error);
  // An unknown table format names itself; nothing is written.
  EXPECT_EQ(trainrx_export(files1, 1, "/nonexistent/dataset", "xlsx", nullptr, nullptr, 0, nullptr, 0, &out, &size, &error), 2);
  EXPECT_EQ(Take(error), "--format xlsx: unknown table format (expected parquet or csv)");
}

TEST(CApiTest, ANullOutArgumentIsTheCallersBugSeventy) {
  const char* paths[] = {"x.json"};
  char* error = nullptr;
  EXPECT_EQ(trainrx_analyze(paths, 1, nullptr, 0, nullptr, 0, nullptr, &error), 70);
  EXPECT_EQ(Take(error), "trainrx_analyze: out is NULL");
}

TEST(CApiTest, EveryStatusKindHasItsCode) {
  char* error = nullptr;
  EXPECT_EQ(trainrx::api::SetError(&error, trainrx::Status::Error("run.json: not a JSON trace")), 2);
  EXPECT_EQ(Take(error), "run.json: not a JSON trace");
  EXPECT_EQ(trainrx::api::SetError(&error, trainrx::Status::Internal("splitter and parser disagree")), 70);
  EXPECT_EQ(Take(error), "trainrx: internal error: splitter and parser disagree (a bug in trainrx: please report it)");
  EXPECT_EQ(trainrx::api::SetError(&error, trainrx::Status::Ok()), 70);  // an ok Status is no error: a bug
  EXPECT_EQ(Take(error).rfind("trainrx: internal error: ", 0), 0u);
  EXPECT_EQ(trainrx::api::SetError(nullptr, trainrx::Status::Error("no *error wanted")), 2);
}

}  // namespace
