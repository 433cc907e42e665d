// Where an op ran: the nn.Module (and the user annotation) enclosing it on its thread.
//
// Module ranges come from two sources, both named "nn.Module: <name>":
//   - our collector: the Python start-up hook (probes/python/sitecustomize.py) wraps every module
//     call in a record_function range "nn.Module: Net.features.0 (Conv2d)" (its root's class, the name it has in
//     the root's named_modules(), then its class);
//   - PyTorch's profiler with with_stack=True: Python-tracer frames "nn.Module: Conv2d_0".
// On one thread module ranges nest (a module's forward runs inside its parent's), so the
// innermost one enclosing an op is found by walking parents from the latest range that starts
// before it. Ops on threads without module ranges (autograd's backward thread, LibTorch
// programs) have none: callers say what they know instead (the annotation, the phase).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

class ScopeIndex {
 public:
  // Modules: ranges named "nn.Module: ...". Annotations: the other user annotations (not steps).
  enum class What { kModules, kAnnotations };
  ScopeIndex(const profiler::Trace& trace, What what);
  bool empty() const { return ranges_ == 0; }
  size_t size() const { return ranges_; }
  // The innermost range enclosing [ts, end) on `track`, as its display name ("Net.features.0
  // (Conv2d)" for modules, the annotation's name otherwise); "" when none does.
  std::string_view Of(uint32_t track, int64_t ts, int64_t end) const;
  std::string_view Of(const profiler::Event& e) const { return Of(e.track, e.ts_ns, e.end_ns()); }

  struct Range {
    int64_t ts = 0, end = 0;
    std::string_view name;  // display name
    int32_t parent = -1;    // index of the innermost enclosing range of the track, -1: none
  };
  // The ranges of one track, in start order (modules: the module table reads them).
  const std::vector<Range>& RangesOf(uint32_t track) const;

 private:
  std::vector<std::vector<Range>> by_track_;
  size_t ranges_ = 0;
};

// The display name of a module range, or "" when `name` is not one ("nn.Module: Net.features.0
// (Conv2d)" -> "Net.features.0 (Conv2d)").
std::string_view ModuleName(std::string_view name);

// "Net.features.0 (Conv2d)" -> " in Net.features.0 (Conv2d)"; "" -> "": for example strings.
std::string InModule(std::string_view module);

// The user's line around a call, in the text of torch.profiler's with_stack frames
// ("/u/train.py(57): train_step"): a python_function frame, or the start-up hook's
// "trainrx::at <file>(<line>): <function>" range around the few calls that sync (issue 49.12).
// "" for any other event.
std::string_view CallSiteText(const profiler::Trace& trace, const profiler::Event& e);

// Whether a frame's text is the user's code: not PyTorch's, a library's, the interpreter's or a
// module range ("torch/nn/modules/module.py(1501): _call_impl" is not; "train.py(57): step" is).
bool IsUserFrame(std::string_view frame);

// The call sites open along one thread's events (visit them in trace order): Visit(e) keeps the
// frames that enclose e; UserSite() is the innermost user frame's text, "" when none.
class CallSites {
 public:
  explicit CallSites(const profiler::Trace& trace) : trace_(trace) {}
  // Returns true when e is itself a call-site frame (callers skip it as an op).
  bool Visit(const profiler::Event& e);
  std::string_view UserSite() const;
  // When the innermost user frame opened (INT64_MIN when none): a read inside an optimizer's step
  // whose user frame opened before the step is the optimizer's own (the site is the line that
  // called optimizer.step), one whose frame opened inside it is the closure's.
  int64_t UserSiteStart() const;
  // Without a user frame: the innermost frame in an installed library other than torch, from its
  // package on ("transformers/trainer.py(1911): _run_epoch": Trainer's loss check), "" when none.
  // Where a framework reads the value, the fix is its setting, so its line is worth naming.
  std::string_view LibrarySite() const;

 private:
  const profiler::Event* UserFrame() const;
  const profiler::Trace& trace_;
  std::vector<const profiler::Event*> open_;
};

// Where `e` ran, for example strings: " in <module>" when a module range encloses it, else
// " in <annotation>" (e.g. " in Optimizer.step#AdamW.step"), else "".
std::string WhereIn(const ScopeIndex& modules, const ScopeIndex& annotations, const profiler::Event& e);

}  // namespace trainrx::analyzers
