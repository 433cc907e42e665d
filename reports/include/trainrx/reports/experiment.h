// trainrx::reports experiments — renders what `trainrx fix`, `sweep` and `ab` measured
// (experiments/results.h) as text (terminal), Markdown or JSON (schema "trainrx.experiment/1",
// docs/json-schema.md). Torch-free.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "trainrx/experiments/results.h"

namespace trainrx::reports {

using experiments::AbReport;
using experiments::Arm;
using experiments::FixReport;
using experiments::FixRow;
using experiments::SweepCell;
using experiments::SweepReport;
namespace stats = experiments::stats;

// Text for a terminal, or with `markdown` the same content as Markdown (headings, pipe tables).
void WriteFixText(const FixReport& r, std::ostream& out, bool markdown = false);
void WriteFixJson(const FixReport& r, std::ostream& out);
void WriteSweepText(const SweepReport& r, std::ostream& out, bool markdown = false);
void WriteSweepJson(const SweepReport& r, std::ostream& out);
void WriteAbText(const AbReport& r, std::ostream& out, bool markdown = false);
void WriteAbJson(const AbReport& r, std::ostream& out);
// The record in `format`: json, html, md, else text.
void WriteFix(const std::string& format, const FixReport& r, std::ostream& out);
void WriteSweep(const std::string& format, const SweepReport& r, std::ostream& out);
void WriteAb(const std::string& format, const AbReport& r, std::ostream& out);

// "1.23x [1.10, 1.35]" and friends, shared by the renderers.
std::string FormatSpeedup(const stats::Comparison& c);

}  // namespace trainrx::reports
