// Byte sources for the trace reader: a file, a memory buffer, or gzip on top of either.
// Private to profiler/. Read() returns bytes read, 0 at end of input, -1 on error (message in
// error()). Gzip is detected by magic bytes (1f 8b), never by file name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "trainrx/profiler/status.h"

namespace trainrx::profiler::io {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::ptrdiff_t Read(char* dst, size_t n) = 0;
  // About how many bytes Read() will give in all (a file's size; a gzip file's times a typical
  // trace ratio), for sizing what is built from them; 0 when unknown. A hint only.
  virtual uint64_t SizeHint() const { return 0; }
  const std::string& error() const { return error_; }
  // True when the input ended early in a way the source can tell (gzip data without its end):
  // Read() then returned 0, and the reader decides whether a cut-off trace is an error.
  bool cut_short() const { return cut_short_; }

 protected:
  std::string error_;
  bool cut_short_ = false;
};

// Opens `path`, sniffs gzip. An error ("<path>: cannot open: <why>") when the file cannot be opened
// or its first bytes cannot be read.
StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);
// Wraps a memory buffer (must outlive the source), sniffs gzip.
std::unique_ptr<ByteSource> OpenMemorySource(std::string_view bytes);

// Compresses `data` as gzip into `out` (used by the writer for *.gz output).
bool GzipCompress(std::string_view data, std::string* out, int level = 6);

}  // namespace trainrx::profiler::io
