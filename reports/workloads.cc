#include "trainrx/reports/workloads.h"

#include <fmt/format.h>

#include <string>

#include "knobs.h"
#include "trainrx/analyzers/catalog.h"

namespace trainrx::reports {

void WriteWorkloads(std::ostream& out) {
  out << "Workloads\n";
  for (const auto& w : workloads::Workloads()) out << fmt::format("  {:<6} {}\n", w.name, w.help);
  out << "\nKnobs (--set knob=value; defaults are the recommended setting)\n";
  out << fmt::format("  {:<20} {:<8} {:<6} {:<26} {:<5} {}\n", "knob", "default", "bad", "finding", "where", "what");
  for (const auto& k : workloads::Knobs()) {
    // The finding the knob's bad value plants (the finding catalog); a bad value that no analyzer
    // flags yet shows "-".
    const analyzers::CatalogEntry* planted = analyzers::FindingPlantedBy(k.name);
    const char* finding = planted ? planted->id : *k.bad_value ? "-" : "";
    out << fmt::format("  {:<20} {:<8} {:<6} {:<26} {:<5} {}\n", k.name, k.default_value, k.bad_value, finding, k.where,
                       k.help);
  }
  out << "\nPresets (--preset NAME)\n";
  for (const auto& p : workloads::Presets()) {
    std::string settings;
    for (const auto& [k, v] : p.settings) settings += fmt::format("{}{}={}", settings.empty() ? "" : " ", k, v);
    out << fmt::format("  {:<14} {}{}\n", p.name, p.help, settings.empty() ? "" : " (" + settings + ")");
  }
  out << "\nwhere: cpu = has its effect here; gpu = only with device=cuda; dist = only with --nproc > 1\n";
}

}  // namespace trainrx::reports
