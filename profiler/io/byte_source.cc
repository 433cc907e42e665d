#include "byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#ifdef TRAINRX_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include <cerrno>
#include <cstring>
#include <vector>

namespace trainrx::profiler::io {
namespace {

class FdSource final : public ByteSource {
 public:
  explicit FdSource(int fd) : fd_(fd) {}
  ~FdSource() override { ::close(fd_); }
  uint64_t SizeHint() const override {
    struct stat st;
    return ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  }
  std::ptrdiff_t Read(char* dst, size_t n) override {
    for (;;) {
      const ssize_t r = ::read(fd_, dst, n);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      error_ = std::strerror(errno);
      return -1;
    }
  }

 private:
  int fd_;
};

class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::string_view b) : bytes_(b) {}
  uint64_t SizeHint() const override { return bytes_.size(); }
  std::ptrdiff_t Read(char* dst, size_t n) override {
    const size_t k = std::min(n, bytes_.size() - pos_);
    std::memcpy(dst, bytes_.data() + pos_, k);
    pos_ += k;
    return static_cast<std::ptrdiff_t>(k);
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Streams gzip (also concatenated members) out of another source. Two inflaters, one contract:
// ISA-L's igzip where the build found it (3.0-3.3x zlib's speed on trace files, measured by
// bench/inflate_bench.cc), else zlib. Not libdeflate, faster than zlib too: it only inflates whole
// buffers, which would put the entire decompressed trace in memory; streaming keeps peak memory to
// one window. The input ending inside a member sets cut_short(); bad data is an error.
#ifdef TRAINRX_HAVE_ISAL
class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<ByteSource> inner, std::string prefix) : inner_(std::move(inner)), in_(1u << 18) {
    isal_inflate_init(&st_);
    st_.crc_flag = ISAL_GZIP;
    std::memcpy(in_.data(), prefix.data(), prefix.size());
    st_.next_in = reinterpret_cast<uint8_t*>(in_.data());
    st_.avail_in = static_cast<uint32_t>(prefix.size());
  }
  uint64_t SizeHint() const override { return inner_->SizeHint() * 10; }  // traces inflate 8-15x
  std::ptrdiff_t Read(char* dst, size_t n) override {
    if (done_) return 0;
    const size_t want = std::min<size_t>(n, 1u << 30);
    st_.next_out = reinterpret_cast<uint8_t*>(dst);
    st_.avail_out = static_cast<uint32_t>(want);
    while (st_.avail_out > 0) {
      if (st_.block_state == ISAL_BLOCK_FINISH) {  // a member ended (its checksum verified)
        if (st_.avail_in == 0 && !Refill()) return -1;
        if (done_) break;  // the input ends after a whole member
        // Another gzip member follows (concatenated .gz files are valid gzip).
        uint8_t* next_in = st_.next_in;
        const uint32_t avail_in = st_.avail_in;
        isal_inflate_reset(&st_);
        st_.crc_flag = ISAL_GZIP;
        st_.next_in = next_in;
        st_.avail_in = avail_in;
      }
      if (st_.avail_in == 0) {
        if (!Refill()) return -1;
        if (done_) {
          cut_short_ = true;  // ends inside a member: what was inflated so far is returned
          break;
        }
      }
      const int rc = isal_inflate(&st_);
      if (rc != ISAL_DECOMP_OK) {
        error_ = std::string("gzip data is corrupt: ") + IsalError(rc);
        return -1;
      }
    }
    return static_cast<std::ptrdiff_t>(want - st_.avail_out);
  }

 private:
  // Reads more compressed input; false on a read error; done_ at its end.
  bool Refill() {
    const std::ptrdiff_t r = inner_->Read(in_.data(), in_.size());
    if (r < 0) {
      error_ = inner_->error();
      return false;
    }
    if (r == 0) done_ = true;
    st_.next_in = reinterpret_cast<uint8_t*>(in_.data());
    st_.avail_in = static_cast<uint32_t>(r);
    return true;
  }
  static const char* IsalError(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK: return "invalid deflate block";
      case ISAL_INVALID_SYMBOL: return "invalid deflate symbol";
      case ISAL_INVALID_LOOKBACK: return "invalid distance";
      case ISAL_INVALID_WRAPPER: return "not a gzip header";
      case ISAL_UNSUPPORTED_METHOD: return "unsupported compression method";
      case ISAL_INCORRECT_CHECKSUM: return "incorrect checksum";
      default: return "inflate failed";
    }
  }

  std::unique_ptr<ByteSource> inner_;
  std::vector<char> in_;
  inflate_state st_;
  bool done_ = false;
};
#else
class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<ByteSource> inner, std::string prefix)
      : inner_(std::move(inner)), in_(1u << 18) {
    std::memset(&zs_, 0, sizeof zs_);
    inflateInit2(&zs_, 15 + 32);
    std::memcpy(in_.data(), prefix.data(), prefix.size());
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(prefix.size());
  }
  ~GzipSource() override { inflateEnd(&zs_); }
  uint64_t SizeHint() const override { return inner_->SizeHint() * 10; }  // traces inflate 8-15x
  std::ptrdiff_t Read(char* dst, size_t n) override {
    if (done_) return 0;
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (zs_.avail_out > 0) {
      if (zs_.avail_in == 0) {
        const std::ptrdiff_t r = inner_->Read(in_.data(), in_.size());
        if (r < 0) {
          error_ = inner_->error();
          return -1;
        }
        if (r == 0) {
          // Ends inside compressed data: what was inflated so far is returned; the caller sees EOF
          // and cut_short().
          if (!member_ended_) cut_short_ = true;
          done_ = true;
          break;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(r);
      }
      if (member_ended_) {
        // Another gzip member follows (concatenated .gz files are valid gzip).
        inflateReset(&zs_);
        member_ended_ = false;
      }
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        error_ = std::string("gzip data is corrupt: ") + (zs_.msg ? zs_.msg : "inflate failed");
        return -1;
      }
      if (rc == Z_BUF_ERROR && zs_.avail_in != 0) {
        error_ = "gzip data is corrupt";
        return -1;
      }
    }
    return static_cast<std::ptrdiff_t>(std::min<size_t>(n, 1u << 30) - zs_.avail_out);
  }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::vector<char> in_;
  z_stream zs_;
  bool member_ended_ = false;
  bool done_ = false;
};
#endif

Status CannotOpen(std::string_view path, std::string_view why) {
  return Status::Error(std::string(path) + ": cannot open: " + std::string(why));
}

// `path` names the source in an error.
StatusOr<std::unique_ptr<ByteSource>> Sniff(std::unique_ptr<ByteSource> src, std::string_view path) {
  // Peek two bytes; hand them back through the gzip prefix or a small replay wrapper.
  char magic[2];
  std::ptrdiff_t got = 0;
  while (got < 2) {
    const std::ptrdiff_t r = src->Read(magic + got, 2 - got);
    if (r < 0) return CannotOpen(path, src->error());
    if (r == 0) break;
    got += r;
  }
  std::string prefix(magic, static_cast<size_t>(got));
  if (got == 2 && static_cast<unsigned char>(magic[0]) == 0x1f &&
      static_cast<unsigned char>(magic[1]) == 0x8b) {
    return std::unique_ptr<ByteSource>(std::make_unique<GzipSource>(std::move(src), std::move(prefix)));
  }
  struct Replay final : ByteSource {
    Replay(std::unique_ptr<ByteSource> s, std::string p) : inner(std::move(s)), prefix(std::move(p)) {}
    uint64_t SizeHint() const override { return inner->SizeHint(); }
    std::ptrdiff_t Read(char* dst, size_t n) override {
      if (pos < prefix.size()) {
        const size_t k = std::min(n, prefix.size() - pos);
        std::memcpy(dst, prefix.data() + pos, k);
        pos += k;
        return static_cast<std::ptrdiff_t>(k);
      }
      const std::ptrdiff_t r = inner->Read(dst, n);
      if (r < 0) error_ = inner->error();
      return r;
    }
    std::unique_ptr<ByteSource> inner;
    std::string prefix;
    size_t pos = 0;
  };
  return std::unique_ptr<ByteSource>(std::make_unique<Replay>(std::move(src), std::move(prefix)));
}

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CannotOpen(path, std::strerror(errno));
  return Sniff(std::make_unique<FdSource>(fd), path);
}

std::unique_ptr<ByteSource> OpenMemorySource(std::string_view bytes) {
  return std::move(Sniff(std::make_unique<MemorySource>(bytes), "memory")).value();  // memory cannot fail a read
}

bool GzipCompress(std::string_view data, std::string* out, int level) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&zs, data.size()) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data());
  zs.avail_out = static_cast<uInt>(out->size());
  const int rc = deflate(&zs, Z_FINISH);
  out->resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

}  // namespace trainrx::profiler::io
