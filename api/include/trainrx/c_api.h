/* trainrx C API — the analysis behind `trainrx analyze`, as a C ABI for the Python package
 * (python/trainrx/_native.py loads libtrainrx_api.so with ctypes).
 *
 * Why a C ABI and not a binding module (nanobind/pybind11): what crosses is one document, the
 * `trainrx analyze --format json` text (or the HTML / Markdown / text page), which Python parses
 * itself; a C ABI needs no Python headers at build time and one library serves every Python 3
 * (the wheel is py3-none), and the findings cannot drift from the CLI's: both are rendered by the
 * same reports/ writers from the same sets::AnalyzeSet.
 *
 * Ownership: an analysis is freed with trainrx_analysis_free, a string with trainrx_string_free.
 * Errors: a call returns 0 on success; otherwise non-zero with *error set to a message naming the
 * file / field (the same text the CLI prints). No call throws or aborts across the ABI.
 * Threading: calls share no state; one analysis may be rendered from one thread at a time. */
#ifndef TRAINRX_C_API_H_
#define TRAINRX_C_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRAINRX_API __attribute__((visibility("default")))

typedef struct trainrx_analysis trainrx_analysis;

/* `trainrx analyze` options as flags. */
enum {
  TRAINRX_STRICT = 1,      /* --strict */
  TRAINRX_KEEP_CLOCKS = 2, /* --keep-clocks */
  TRAINRX_PER_RANK = 4     /* --per-rank */
};

/* The version of trainrx ("0.1.0"). */
TRAINRX_API const char* trainrx_version(void);

/* Analyzes `paths` (trace files, folders of rank traces, summaries) as `trainrx analyze` would:
 * `thresholds` are "id.key=value" overrides (--threshold), `step_name` the --step name (NULL or ""
 * for none), `flags` TRAINRX_* above. On success *out owns the analysis. Returns 2 on bad input
 * (*error: which file, what was wrong), 70 on an internal error. */
TRAINRX_API int trainrx_analyze(const char* const* paths, size_t n_paths, const char* const* thresholds,
                                size_t n_thresholds, const char* step_name, int flags, trainrx_analysis** out,
                                char** error);

/* The analysis rendered as `format` ("json", "html", "md", "text"): *out (NUL-terminated, *size
 * bytes without the NUL) is the same text `trainrx analyze --format FORMAT` writes. */
TRAINRX_API int trainrx_render(const trainrx_analysis* analysis, const char* format, char** out, size_t* size,
                               char** error);

/* The trace files `paths` stand for (folders expanded, sorted), as a JSON array of strings in *out:
 * the order every set analysis reads them in. */
TRAINRX_API int trainrx_expand_paths(const char* const* paths, size_t n_paths, char** out, size_t* size, char** error);

/* A set analyzed on a cluster (python/trainrx/dask.py): the work of one trace file, run where it
 * is: `path` read and analyzed on its own, its ranks' sides as JSON ("trainrx.file_sides/1") in *out.
 * `thresholds` and `step_name` as for trainrx_analyze. */
TRAINRX_API int trainrx_file_sides(const char* path, const char* const* thresholds, size_t n_thresholds,
                                   const char* step_name, char** out, size_t* size, char** error);

/* The reduce: the set's analysis from each file's document (docs[i] from trainrx_file_sides(files[i]),
 * files in the order trainrx_expand_paths gives for `inputs`, the paths the user named). The same
 * analysis trainrx_analyze gives for `inputs` with TRAINRX_PER_RANK, rendered byte for byte alike. */
TRAINRX_API int trainrx_analyze_file_sides(const char* const* inputs, size_t n_inputs, const char* const* files,
                                           const char* const* docs, size_t n_files,
                                           const char* const* thresholds, size_t n_thresholds, const char* step_name,
                                           int flags, trainrx_analysis** out, char** error);

/* `trainrx export`: the set's tables under `dir` in `format` ("parquet" or "csv"; NULL: parquet) as
 * run `run` (NULL or "": from the first input's name). *summary: JSON {"run", "strategy", "ranks",
 * "files", "rows": {table: rows}}. Parquet needs the plugin beside this library (and pyarrow). */
TRAINRX_API int trainrx_export(const char* const* paths, size_t n_paths, const char* dir, const char* format,
                               const char* run, const char* const* thresholds, size_t n_thresholds,
                               const char* step_name, int flags, char** summary, size_t* size, char** error);

TRAINRX_API void trainrx_analysis_free(trainrx_analysis* analysis);
TRAINRX_API void trainrx_string_free(char* text);

#ifdef __cplusplus
}
#endif

#endif /* TRAINRX_C_API_H_ */
