#!/usr/bin/env python3
"""trainrx vs the PyTorch profiler TensorBoard plugin (PyPI torch-tb-profiler 0.4.3): step count,
step time and DataLoader share per step, on the same Kineto traces.

Theirs: the plugin's own overview path, called in-process without a TensorBoard server:
  RunProfileData.parse(worker, span, path, cache_dir)      (profiler/data.py:100; runs EventParser,
                                                            OverallParser, GPU metrics, ...)
  RunGenerator(worker, span, data)._generate_overview()    (profiler/run_generator.py:79)
i.e. the 'steps' rows and 'performance' block the Overview page shows. The EventParser instance is
captured (a subclass swapped into profiler/data.py) to read the step ranges too, and the host-side
ProfilerStep ranges as they were before the plugin stretched them to the GPU (update_device_steps).
Ours: `TRAINRX analyze TRACE --format json`, the "steps" section.

DataLoader share = sum of DataLoader time / sum of step time over the steps each tool keeps (the
plugin's "Average Step Time" percentages are the same ratio). Median step = median of step totals.

Usage:
  tb_plugin_compare.py [--trainrx build/trainrx] [--tb-python PY] [--per-step] [--explain]
                       [--json OUT] TRACE.json[.gz] ...
  --tb-python  a Python with torch-tb-profiler (default $TB_VENV/bin/python, TB_VENV defaulting to
               $REPO/.venv-tb; bench/tb_plugin_setup.sh makes it). This script re-runs itself
               under it for the plugin side (--plugin-side), so it needs no torch and no pandas here.
  --per-step   also print each step: ours vs theirs wall and DataLoader time
  --explain    also print the DataLoader share the plugin's own priority rule gives on the *host*
               ProfilerStep ranges (separates the step-boundary effect from the priority effect)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# --------------------------------------------------------------------------------------------
# Plugin side (runs under the tb venv's Python)
# --------------------------------------------------------------------------------------------
def plugin_side(path):
    import gzip
    import logging
    import tempfile

    logging.disable(logging.WARNING)  # the plugin warns per trace (tail steps removed, ...)
    from torch_tb_profiler import __version__ as tb_version
    from torch_tb_profiler.profiler import data as tb_data
    from torch_tb_profiler.profiler import event_parser as tb_ep
    from torch_tb_profiler.profiler.overall_parser import OverallParser
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    captured = {}

    class CapturingEventParser(tb_ep.EventParser):
        def __init__(self):
            super().__init__()
            captured['parser'] = self

        def update_device_steps(self, runtime_node_list):
            captured['host_steps'] = list(self.steps)
            super().update_device_steps(runtime_node_list)

    tb_data.EventParser = CapturingEventParser
    with tempfile.TemporaryDirectory() as cache_dir:
        prof = tb_data.RunProfileData.parse('worker0', None, path, cache_dir)
        overview = RunGenerator('worker0', None, prof)._generate_overview()
    parser = captured['parser']
    R = tb_ep.ProfileRole

    cols = [c['name'] for c in overview['steps']['columns'] if c.get('role') != 'tooltip']
    steps = []
    for row, rng in zip(overview['steps']['rows'], parser.steps):
        vals = [row[0]] + [v for v in row[1:] if not isinstance(v, str)]
        parts = dict(zip(cols[1:], vals[1:]))
        steps.append({'name': vals[0], 'start_us': rng[0], 'end_us': rng[1],
                      'total_us': rng[1] - rng[0], 'parts_us': parts})

    # What the trace holds that bears on the DataLoader figure.
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        raw = json.load(f)['traceEvents']
    dl_cats = {}
    host_names = set()
    runtime_events = 0
    for e in raw:
        n = e.get('name') or ''
        if e.get('ph') == 'X' and str(e.get('cat', '')).lower() in ('cuda_runtime', 'cuda_driver'):
            runtime_events += 1
        if e.get('ph') == 'X' and (n.startswith('enumerate(DataLoader)#') or n.startswith('enumerate(DataPipe)#')):
            dl_cats[e.get('cat')] = dl_cats.get(e.get('cat'), 0) + 1
        if e.get('ph') == 'X' and n.startswith('ProfilerStep#'):
            host_names.add(n)

    host = captured.get('host_steps', [])
    explain = None
    if host and parser.steps:
        # The plugin's own priority rule (OverallParser.Statistics.create_from_range) applied to the
        # host ProfilerStep ranges instead of the GPU-stretched ones.
        op = OverallParser()
        op.aggregate(host, parser.role_ranges)
        tot = sum(c.costs[R.Total] for c in op.steps_costs)
        dl = sum(c.costs[R.DataLoader] for c in op.steps_costs)
        # Raw DataLoader coverage of the host steps (no priority), like trainrx's data wait.
        from torch_tb_profiler.profiler.range_utils import get_ranges_sum, intersection_ranges_lists
        raw_dl = sum(get_ranges_sum(intersection_ranges_lists([s], parser.role_ranges[R.DataLoader])) for s in host)
        explain = {'host_dl_share_priority': dl / tot if tot else 0.0,
                   'host_dl_share_raw': raw_dl / tot if tot else 0.0,
                   'host_median_ms': statistics.median([(s[1] - s[0]) / 1e3 for s in host])}
    return {
        'version': tb_version,
        'module': os.path.dirname(tb_data.__file__),
        'steps': steps,
        'host_steps': len(host_names),
        'used_gpu_extension': bool(prof.has_kernel or prof.has_memcpy_or_memset) and any(
            a != b for a, b in zip(host, parser.steps)),
        'dataloader_event_cats': dl_cats,
        'dataloader_ranges_kept': bool(parser.role_ranges[R.DataLoader]),
        'cuda_runtime_events': runtime_events,
        'runtime_ranges_kept': bool(parser.role_ranges[R.Runtime]),
        'avg': {c['name']: c['value'] for c in overview['performance'][0]['children']},
        'avg_step_us': overview['performance'][0]['value'],
        'explain': explain,
    }


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------
def run_plugin(tb_python, path):
    p = subprocess.run([tb_python, os.path.abspath(__file__), '--plugin-side', path],
                       capture_output=True, text=True, cwd='/')
    if p.returncode != 0:
        return {'error': (p.stderr.strip().splitlines() or ['rc %d' % p.returncode])[-1]}
    return json.loads(p.stdout)


def run_trainrx(binary, path):
    p = subprocess.run([binary, 'analyze', path, '--format', 'json'], capture_output=True, text=True)
    try:
        d = json.loads(p.stdout)
    except ValueError:
        return {'error': (p.stderr.strip().splitlines() or ['rc %d' % p.returncode])[-1]}
    return d.get('steps') or {'source': 'none', 'count': 0, 'rows': []}


def label(path):
    # parent folder too: torch.profiler's tensorboard_trace_handler names files after host and pid
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return '%s/%s' % (parent, os.path.basename(path)) if parent else os.path.basename(path)


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    return '-' if x is None else format(x, spec)


def summarize(path, ours, theirs):
    o_rows = ours.get('rows', []) if 'error' not in ours else []
    t_steps = theirs.get('steps', []) if 'error' not in theirs else []
    o_wall = sum(r['wall_ns'] for r in o_rows)
    o_dl = sum(r['data_wait_ns'] for r in o_rows)
    t_tot = sum(s['total_us'] for s in t_steps)
    t_dl = sum(s['parts_us'].get('DataLoader', 0) for s in t_steps)
    s = {
        'trace': label(path),
        'ours_source': ours.get('source'),
        'ours_steps': len(o_rows), 'theirs_steps': len(t_steps),
        'ours_median_ms': median([r['wall_ns'] / 1e6 for r in o_rows]),
        'theirs_median_ms': median([x['total_us'] / 1e3 for x in t_steps]),
        'ours_dl_pct': 100.0 * o_dl / o_wall if o_wall else None,
        'theirs_dl_pct': 100.0 * t_dl / t_tot if t_tot else None,
    }
    notes = []
    if 'error' in ours:
        notes.append('trainrx failed: ' + ours['error'])
    if 'error' in theirs:
        notes.append('plugin failed: ' + theirs['error'])
    else:
        host = theirs['host_steps']
        if host == 0:
            notes.append('no ProfilerStep#: plugin makes 1 pseudo-step, first to last CPU op (event_parser.py:238-240)'
                         + ('' if o_rows else '; trainrx: no Optimizer.step# to infer steps from'))
        elif len(t_steps) < host:
            notes.append('plugin drops the last %d step(s) as incomplete (event_parser.py:392-410)' % (host - len(t_steps)))
        if theirs.get('used_gpu_extension'):
            notes.append('plugin steps stretched to the GPU: prev step GPU end .. last GPU op launched (event_parser.py:300-390)')
        if theirs.get('cuda_runtime_events') and not theirs.get('runtime_ranges_kept'):
            notes.append('cat cuda_runtime unknown to the plugin (trace.py:38-53): Runtime 0, steps not stretched '
                         '(fixed in kineto main #1166, unreleased)')
        cats = theirs.get('dataloader_event_cats', {})
        if not cats:
            notes.append('no DataLoader ranges in the trace')
        elif not theirs.get('dataloader_ranges_kept') and cats.get('user_annotation'):
            notes.append('DataLoader range is cat user_annotation: the plugin drops it (trace.py:189-194; '
                         'fixed in kineto main #845, unreleased)')
        elif t_dl and theirs.get('used_gpu_extension'):
            notes.append('plugin: DataLoader only where no kernel/memcpy/memset/runtime is active (overall_parser.py:39-53)')
    s['note'] = '; '.join(notes)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('traces', nargs='+')
    ap.add_argument('--trainrx', default=os.path.join(REPO, 'build', 'trainrx'))
    ap.add_argument('--tb-python', default=os.path.join(os.environ.get('TB_VENV', os.path.join(REPO, '.venv-tb')), 'bin', 'python'))
    ap.add_argument('--per-step', action='store_true')
    ap.add_argument('--explain', action='store_true')
    ap.add_argument('--json')
    ap.add_argument('--plugin-side', action='store_true', help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.plugin_side:
        json.dump(plugin_side(a.traces[0]), sys.stdout)
        return 0
    if not os.access(a.trainrx, os.X_OK):
        sys.exit('tb_plugin_compare: no trainrx binary at %s (--trainrx)' % a.trainrx)
    if not os.access(a.tb_python, os.X_OK):
        sys.exit('tb_plugin_compare: no tb-plugin Python at %s (run bench/tb_plugin_setup.sh, or --tb-python)' % a.tb_python)

    results = []
    for path in a.traces:
        print('... %s' % path, file=sys.stderr)
        ours = run_trainrx(a.trainrx, path)
        theirs = run_plugin(a.tb_python, path)
        results.append({'path': path, 'ours': ours, 'theirs': theirs, 'summary': summarize(path, ours, theirs)})

    version = next((r['theirs'].get('version') for r in results if 'version' in r['theirs']), '?')
    where = next((r['theirs'].get('module') for r in results if 'module' in r['theirs']), '?')
    print('trainrx (%s) vs torch-tb-profiler %s (%s)\n' % (a.trainrx, version, where))
    print('| trace | steps ours/theirs | median step ms ours/theirs | DataLoader % ours/theirs | note |')
    print('|---|---|---|---|---|')
    for r in results:
        s = r['summary']
        print('| %s | %d / %d | %s / %s | %s / %s | %s |' % (
            s['trace'], s['ours_steps'], s['theirs_steps'],
            fmt(s['ours_median_ms'], '.2f'), fmt(s['theirs_median_ms'], '.2f'),
            fmt(s['ours_dl_pct'], '.1f'), fmt(s['theirs_dl_pct'], '.1f'), s['note']))

    if a.explain:
        print('\nDataLoader share on the host ProfilerStep ranges (plugin figures, host steps not stretched to the GPU):\n')
        print('| trace | host median ms | DL % raw (no priority) | DL % plugin priority | ours | theirs |')
        print('|---|---|---|---|---|---|')
        for r in results:
            e = r['theirs'].get('explain')
            s = r['summary']
            if not e:
                continue
            print('| %s | %.2f | %.1f | %.1f | %s | %s |' % (
                s['trace'], e['host_median_ms'], 100 * e['host_dl_share_raw'], 100 * e['host_dl_share_priority'],
                fmt(s['ours_dl_pct'], '.1f'), fmt(s['theirs_dl_pct'], '.1f')))

    if a.per_step:
        for r in results:
            o = {row['name'].split('#')[-1]: row for row in r['ours'].get('rows', [])}
            t = {st['name']: st for st in r['theirs'].get('steps', [])}
            names = sorted(set(o) | set(t), key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))
            print('\n%s\n' % r['summary']['trace'])
            print('| step | wall ms ours/theirs | DataLoader ms ours/theirs | DataLoader % ours/theirs |')
            print('|---|---|---|---|')
            for n in names:
                ow = o[n]['wall_ns'] / 1e6 if n in o else None
                od = o[n]['data_wait_ns'] / 1e6 if n in o else None
                tw = t[n]['total_us'] / 1e3 if n in t else None
                td = t[n]['parts_us'].get('DataLoader', 0) / 1e3 if n in t else None
                print('| %s | %s / %s | %s / %s | %s / %s |' % (
                    n, fmt(ow, '.2f'), fmt(tw, '.2f'), fmt(od, '.2f'), fmt(td, '.2f'),
                    fmt(100 * od / ow if ow else None, '.1f'), fmt(100 * td / tw if tw else None, '.1f')))

    if a.json:
        with open(a.json, 'w') as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
