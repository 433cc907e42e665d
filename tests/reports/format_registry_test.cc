// One interface per kind of output (issue 61): a report format is one class and one registration
// (reports/format.h). A toy format registered here renders all six documents through the same
// entry points the commands call; the built-in names resolve as before; junit renders the gate only.
#include "trainrx/reports/format.h"

#include <gtest/gtest.h>

#include <sstream>

namespace trainrx::reports {
namespace {

class ToyFormat : public ReportFormat {
 public:
  std::string_view name() const override { return "toy"; }
  void Analysis(const profiler::Trace&, const analyzers::Report& r, const analyzers::Thresholds&, const RenderOptions&,
                std::ostream& out) const override {
    out << "toy analysis, " << r.findings.size() << " findings";
  }
  void Diff(const analyzers::RunDiff&, std::ostream& out) const override { out << "toy diff"; }
  void Gate(const GateReport&, std::ostream& out) const override { out << "toy gate"; }
  void Fix(const FixReport&, std::ostream& out) const override { out << "toy fix"; }
  void Sweep(const SweepReport&, std::ostream& out) const override { out << "toy sweep"; }
  void Ab(const AbReport&, std::ostream& out) const override { out << "toy ab"; }
};

TEST(FormatRegistryTest, ARegisteredFormatRendersAllSixDocuments) {
  EXPECT_FALSE(IsReportFormat("toy"));
  RegisterFormat(std::make_unique<ToyFormat>());
  EXPECT_TRUE(IsReportFormat("toy"));
  const auto render = [](auto&& write) {
    std::ostringstream out;
    write(out);
    return out.str();
  };
  profiler::Trace trace;
  trace.Finalize();
  analyzers::Report report;
  report.findings.resize(2);
  EXPECT_EQ(render([&](std::ostream& o) { WriteReport("toy", trace, report, analyzers::Thresholds(), RenderOptions(), o); }),
            "toy analysis, 2 findings");
  EXPECT_EQ(render([](std::ostream& o) { WriteDiff("toy", analyzers::RunDiff(), o); }), "toy diff");
  EXPECT_EQ(render([](std::ostream& o) { WriteGate("toy", GateReport(), o); }), "toy gate");
  EXPECT_EQ(render([](std::ostream& o) { WriteFix("toy", FixReport(), o); }), "toy fix");
  EXPECT_EQ(render([](std::ostream& o) { WriteSweep("toy", SweepReport(), o); }), "toy sweep");
  EXPECT_EQ(render([](std::ostream& o) { WriteAb("toy", AbReport(), o); }), "toy ab");
  const auto names = FormatNames(Document::kFix);
  EXPECT_NE(std::find(names.begin(), names.end(), "toy"), names.end());
}

TEST(FormatRegistryTest, TheBuiltInFormatsAndJunitForTheGateOnly) {
  for (const char* f : {"text", "md", "json", "html"}) {
    EXPECT_TRUE(IsReportFormat(f)) << f;
    for (Document d : {Document::kAnalysis, Document::kDiff, Document::kGate, Document::kFix, Document::kSweep, Document::kAb})
      EXPECT_NE(FindFormat(f, d), nullptr) << f;
  }
  EXPECT_FALSE(IsReportFormat("junit"));
  EXPECT_NE(FindFormat("junit", Document::kGate), nullptr);
  EXPECT_EQ(FindFormat("junit", Document::kFix), nullptr);
  EXPECT_FALSE(IsReportFormat("xml"));
}

}  // namespace
}  // namespace trainrx::reports
