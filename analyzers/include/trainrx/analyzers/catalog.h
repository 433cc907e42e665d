// trainrx::analyzers catalog — every finding id, once, with what goes with it: what it is, the
// analyzer family that reports it, the fix texts for Python and C++ users (by variant, where the
// trace decides which fix fits), the reference-workload knob that fixes it, the workload knob whose
// bad value plants it, the fix `trainrx fix --cmd` applies to an unmodified script from outside
// (a TRAINRX_FIX token for the start-up hook, and the code change that makes it permanent), and the
// docs page that explains it.
//
// Who reads it: the analyzers (SetFix fills a Finding's fix_python / fix_cpp / knob),
// experiments/fix_plan.cc (which knob `fix` flips, which token `fix --cmd` applies), reports/ (the text
// report's "measure it on your unmodified script" line, the workloads listing) and the tests
// (docs/findings.md lists every id; every knob named is in workloads::Knobs()). Torch-free, no I/O;
// the tables are constants built once: safe from any thread.
//
// Fix texts are fmt templates: `{name}` (with a format spec: `{n:.0f}`) is filled from the
// analyzer's FixArgs, so literal braces are doubled. Example: threads.oversubscribed's variant
// "threads" is "torch.set_num_threads({n:.0f}) (CPUs / local ranks)"; SetFix(f, "threads", {{"n", 2.0}})
// sets f.fix_python to "torch.set_num_threads(2) (CPUs / local ranks)".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "trainrx/analyzers/finding.h"
#include "trainrx/profiler/status.h"

namespace trainrx::analyzers {

// One fix of a finding. Most findings have one; where the trace says which fix fits (the reads
// come from data loading, the kernels are convolutions only...) the analyzer names the variant.
struct FixVariant {
  const char* name;    // "" for a finding's only fix; otherwise the name the analyzer passes
  const char* python;  // fmt templates (see above)
  const char* cpp;
  const char* knob;    // Finding::knob: the reference-workload knob that fixes it ("workers", "anomaly=0"); "" none
  // Whether the entry's outside fix (outside_token) acts on what this variant describes (Finding::
  // outside_fix): "workers=2" gives num_workers=0 loaders workers, nothing to a loader that has them.
  bool outside = true;
  // Where the entry has no transform of its own: the transform whose most generous level bounds
  // this variant's saving (what-if.md); "" none (the saving stays the measured time).
  const char* bound = "";
};

struct CatalogEntry {
  const char* id;       // stable, as docs/findings.md lists them: "sync.host_device"
  const char* family;   // the analyzer family (registry name) that reports it
  const char* summary;  // what it is, in one line (docs, listings)
  std::vector<FixVariant> fixes;  // the first is the default
  const char* planted_by;     // workload knob whose bad value produces it (workloads::Knobs()); "" none
  const char* outside_token;  // TRAINRX_FIX token the start-up hook applies for `fix --cmd`; "" none
                              // (OutsideFixSwitches: whether it can also switch between steps)
  const char* outside_code;   // the code change that makes the outside fix permanent
  const char* doc;            // the docs page that explains it, from the repository root
  // What the fix does to the run's timeline: the what-if replay's transform
  // (analyzers/dependency/what_if.cc, docs/what-if.md), whose prediction the finding carries and
  // whose most generous level bounds its saving; "" none (a variant's `bound` may still bound it).
  const char* transform = "";
};
// The transform whose replay bounds a finding's saving: its entry's transform, else its fix
// variant's bound (Finding::fix_variant); "" none.
std::string_view BoundTransform(const Finding& f);

// Every finding, in the order docs/findings.md lists them.
const std::vector<CatalogEntry>& Catalog();
// Every id of the catalog, in its order.
const std::vector<std::string>& FindingIds();
// nullptr for an id the catalog does not hold (a summary written by another version).
const CatalogEntry* FindCatalogEntry(std::string_view id);
// The finding a workload knob's bad value plants; nullptr when none.
const CatalogEntry* FindingPlantedBy(std::string_view knob);
// Whether the start-up hook can switch an outside fix (an entry's outside_token) on and off between
// two optimizer steps of a running script (TRAINRX_ALT_FIX, probes/python/sitecustomize.py), so
// `fix --cmd` measures it in-process, paired, as `fix` does the workloads' switchable knobs: a flag
// read at every use (anomaly mode, zero_grad's set_to_none, TF32, cudnn.benchmark, deterministic
// algorithms). The others need a new process: DataLoader workers and pinned memory are built once,
// compile_off acts before torch.compile traces, eval_no_grad acts outside the training steps.
// A property of the token, not of a finding (input.workers and input.dataloader_bound share
// "workers=2"), so it is kept once per token rather than beside outside_token in every entry.
bool OutsideFixSwitches(std::string_view token);

// The fixes the start-up hook applies from outside an unmodified script (TRAINRX_FIX tokens; the
// list in probes/python/sitecustomize.py's docstring), each with the what-if transform that predicts
// it ("" none: the trace cannot price it) and the code change that makes it permanent. `fix --cmd
// --also NAME` measures one that no finding named.
struct OutsideFix {
  const char* token;      // "fused"; "workers"
  const char* transform;  // "fused_optimizer"; "" none
  const char* code;       // "" where a catalog entry names the token: its outside_code
  bool switches;          // OutsideFixSwitches: the hook switches it between steps (a flag read at every use)
  const char* value = "";  // the token takes "=VALUE": its name in messages ("N" for workers=N); "" none
};
const std::vector<OutsideFix>& OutsideFixes();
// A name as `fix --also` takes it -> the token the hook reads ("workers=4" stays as given): a token,
// a transform name (fused_optimizer -> fused) or a finding id whose fix has a token; an error
// names the known tokens.
StatusOr<std::string> ResolveOutsideFix(const std::string& name);
// The fix of a resolved token (its key before '='); nullptr for none.
const OutsideFix* FindOutsideFix(std::string_view token);
// The code change that makes a token's fix permanent: the outside_code of the catalog entry that
// names it, else the table's.
std::string OutsideFixCode(std::string_view token);

using FixArg = std::pair<const char*, std::variant<int64_t, double, std::string>>;
struct FixText {
  std::string python, cpp, knob;
  bool outside = true;  // FixVariant::outside
};
// The variant's texts ("": the first) with `args` filled in. An id or variant the catalog does not
// hold, or a template that does not format, is a programming error: std::invalid_argument.
FixText FormatFix(std::string_view id, std::string_view variant, const std::vector<FixArg>& args = {});
// Sets f.fix_python, f.fix_cpp, f.knob, f.outside_fix and f.fix_variant from f.id's variant ("": the first).
void SetFix(Finding& f, std::string_view variant = "", const std::vector<FixArg>& args = {});

}  // namespace trainrx::analyzers
