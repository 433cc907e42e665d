// trainrx::Status / StatusOr (profiler/status.h): the library's one error style.
#include "trainrx/profiler/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainrx {
namespace {

TEST(StatusTest, DefaultIsOkWithNoMessage) {
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, ErrorIsInvalidInputWithItsMessage) {
  const Status s = Status::Error("run.json: cannot open: No such file or directory");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(s.message(), "run.json: cannot open: No such file or directory");
}

TEST(StatusTest, InternalIsItsOwnKind) {
  const Status s = Status::Internal("threshold 'nosuch' is not registered");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.kind(), ErrorKind::kInternal);
}

TEST(StatusTest, ToBoolFillsTheErrorStringOnlyOnError) {
  std::string error = "untouched";
  EXPECT_TRUE(Status::Ok().ToBool(&error));
  EXPECT_EQ(error, "untouched");
  EXPECT_FALSE(Status::Error("a: b").ToBool(&error));
  EXPECT_EQ(error, "a: b");
  EXPECT_FALSE(Status::Error("a: b").ToBool(nullptr));
}

TEST(StatusOrTest, HoldsAValue) {
  StatusOr<std::vector<std::string>> files(std::vector<std::string>{"a.json", "b.json"});
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files.status().ok());
  EXPECT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[1], "b.json");
  const std::vector<std::string> moved = std::move(files).value();
  EXPECT_EQ(moved.size(), 2u);
}

TEST(StatusOrTest, HoldsAnErrorAndRefusesItsValue) {
  const StatusOr<int> n = Status::Error("--steps: not a number");
  EXPECT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(), "--steps: not a number");
  EXPECT_EQ(n.status().kind(), ErrorKind::kInvalidInput);
  EXPECT_THROW((void)n.value(), std::logic_error);
}

TEST(StatusOrTest, AnOkStatusWithoutAValueIsAnInternalError) {
  const StatusOr<int> n = Status::Ok();
  EXPECT_FALSE(n.ok());
  EXPECT_EQ(n.status().kind(), ErrorKind::kInternal);
}

TEST(StatusOrTest, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p(std::make_unique<int>(7));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(**p, 7);
  std::unique_ptr<int> taken = std::move(p).value();
  EXPECT_EQ(*taken, 7);
}

}  // namespace
}  // namespace trainrx
