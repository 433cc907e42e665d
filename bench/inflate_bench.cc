// Gzip inflate speed of the libraries Debian offers, side by side on the same file, streaming into a
// fixed 8 MiB buffer as the reader does (libdeflate cannot stream: it inflates the whole output into
// memory, shown for reference with its memory cost). Prints MB/s of output and the ratio to zlib.
//   build/bench/trainrx_inflate_bench TRACE.json.gz [rounds]
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kOut = 8u << 20;

size_t Zlib(const std::string& in, std::vector<unsigned char>& out) {
  z_stream zs{};
  inflateInit2(&zs, 15 + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  size_t total = 0;
  for (;;) {
    zs.next_out = out.data();
    zs.avail_out = kOut;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    total += kOut - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK) return 0;
  }
  inflateEnd(&zs);
  return total;
}

size_t Isal(const std::string& in, std::vector<unsigned char>& out) {
  inflate_state st;
  isal_inflate_init(&st);
  st.crc_flag = ISAL_GZIP;
  st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(in.data()));
  st.avail_in = static_cast<uint32_t>(in.size());
  size_t total = 0;
  while (st.block_state != ISAL_BLOCK_FINISH) {
    st.next_out = out.data();
    st.avail_out = kOut;
    if (isal_inflate(&st) != ISAL_DECOMP_OK) return 0;
    total += kOut - st.avail_out;
    if (st.avail_out == kOut && st.avail_in == 0) break;
  }
  return total;
}

size_t Deflate(const std::string& in, std::vector<unsigned char>& whole) {
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  size_t got = 0;
  const auto rc = libdeflate_gzip_decompress(d, in.data(), in.size(), whole.data(), whole.size(), &got);
  libdeflate_free_decompressor(d);
  return rc == LIBDEFLATE_SUCCESS ? got : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.gz [rounds]\n", argv[0]);
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  const std::string in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<unsigned char> out(kOut);
  const size_t size = Zlib(in, out);
  if (size == 0) {
    std::fprintf(stderr, "%s: not gzip, or corrupt\n", argv[1]);
    return 2;
  }
  std::vector<unsigned char> whole(size);
  const char* names[] = {"zlib (streaming)", "ISA-L igzip (streaming)", "libdeflate (whole buffer)"};
  double best[3] = {1e30, 1e30, 1e30};
  for (int r = 0; r < rounds; ++r) {  // interleaved, best of the rounds
    for (int k = 0; k < 3; ++k) {
      const auto t0 = Clock::now();
      const size_t n = k == 0 ? Zlib(in, out) : k == 1 ? Isal(in, out) : Deflate(in, whole);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (n != size) {
        std::fprintf(stderr, "%s inflated %zu bytes, zlib %zu\n", names[k], n, size);
        return 1;
      }
      best[k] = std::min(best[k], s);
    }
  }
  std::printf("%s: %.1f MB gzip -> %.1f MB, best of %d rounds\n", argv[1], in.size() / 1e6, size / 1e6, rounds);
  for (int k = 0; k < 3; ++k) {
    std::printf("  %-26s %7.0f MB/s  %5.2fx zlib%s\n", names[k], size / 1e6 / best[k], best[0] / best[k],
                k == 2 ? "  (needs the whole output in memory)" : "");
  }
  return 0;
}
