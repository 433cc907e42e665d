// trainrx::profiler journal format — the binary file the collector's journal appends to while a
// process records ("<trace>.partial", probes/journal.h), and its decoder.
//
// Who calls it: the probe's journal thread (EncodeJournalHeader, AppendJournalFrame: torch-free,
// compiled into libtrainrx_probe.so), and offline code through the trace reader (ReadTraces and
// ReadTraceBuffer recognise the magic and decode: `trainrx record` salvaging a killed process's
// journal, `trainrx analyze run.json.partial`). No threads; the encoder allocates only the output.
//
// Why binary: the journal used to write Kineto JSON at every flush, ~0.5 µs a record
// on a thread that competed with the training's intra-op threads. A frame here is the drained
// fragment as the collector built it: its events in ~8 bytes each (varints, times as differences:
// writing the raw 48-byte events into the page cache was most of a flush's cost in a real run),
// plus the few strings, tracks and side-table rows the fragment uses. JSON is written only when a
// killed run's journal is salvaged, by the same Kineto writer the normal trace path uses.
//
// Layout (native byte order: a journal is read on the machine that wrote it):
//   header  "TRXJRNL" 0x02 | u32 length | u64 hash | payload
//           payload: i32 rank, i64 base_ns, u32 n, n x (str key, str json_value)   (the "trainrx" block)
//   frame   "TRXF" | u32 length | u64 hash | payload          (one per flush, appended by one write)
//           payload: i64 flush_ns, u64 sequence, then the fragment's tables in this order:
//           strings (u32 n; n x str; ids 1..n, 0 is ""), tracks, events (u32 n, then per event a
//           byte saying which of flags, correlation, external id, aux are present, and varints:
//           ts - previous ts and dur zigzagged, name, track, kind, the present ones), memcpys,
//           op_inputs, counters, flows, devices                (str = u32 length + bytes)
// Example: a flush that drained one aten::add on thread 7 is a frame of 4+4+8 bytes of framing and
// a payload holding flush_ns, sequence 3, strings ["aten::add", "trainrx.journal"], one track
// {rank 0, cpu thread, pid 7, tid 7}, one Event{ts, dur, name=1, track=0}, and the journal's
// counter {track 0, name 2, flush_ns, 3}.
//
// A killed process leaves at most its last frame cut off (it is appended by one write): the
// decoder detects it by its length, drops it and counts its bytes ("journal_torn_flush"). A frame
// whose hash or contents do not check out is skipped and counted ("journal_corrupt_frames"); a
// header that does not is an error naming the file. Nothing in a journal is trusted: every index
// is checked before use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainrx/profiler/status.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

// The name and the format version written (3: op inputs carry "Concrete Inputs"; 2:
// compact events). The decoder reads formats 1 (raw 48-byte events) and 2 too, which
// probes built by an earlier trainrx write.
inline constexpr char kJournalMagic[8] = {'T', 'R', 'X', 'J', 'R', 'N', 'L', '\x03'};

// Whether `bytes` starts like a binary journal of any format version (its first 7 bytes).
bool IsJournal(std::string_view bytes);

// The file's first bytes: the rank's identity and its static config (JSON values, as in the
// trace's "trainrx" block).
void EncodeJournalHeader(int32_t rank, int64_t base_ns, const std::vector<std::pair<std::string, std::string>>& config,
                         std::string* out);

// Appends one frame holding `fragment` (a drained part of one rank's recording; it need not be
// finalized) to *out.
// `format` 1 and 2 write the frames of those formats (for tests of the decoder's compatibility only).
void AppendJournalFrame(const Trace& fragment, int64_t flush_ns, uint64_t sequence, std::string* out, int format = 3);

struct JournalContents {
  Trace trace;  // one rank: header config in ranks[0].config; not finalized
  uint64_t frames = 0;          // read whole
  uint64_t torn_bytes = 0;      // a last frame cut off while being written (0: none)
  uint64_t corrupt_frames = 0;  // skipped: hash or contents wrong
  uint64_t corrupt_bytes = 0;
  int64_t last_flush_ns = 0;    // flush_ns of the last frame read (0: none)
};

// Decodes a whole journal. An error ("<name>: ...") when the header is cut off or corrupt; frames that fail are counted in the result, never fatal. The losses are also put in
// the trace's "trainrx" block (journal_torn_bytes, journal_corrupt_frames) so that a trace written
// from it still reports them (profiler/io/importers.cc). The reader reads a journal through DecodeJournal directly
// (importer.h), with no Kineto JSON in between.
Status DecodeJournal(std::string_view bytes, std::string_view name, JournalContents* out);

// The journal the collector would have written for rank `rank` of `trace`: its header and the
// rank's events (with their strings, tracks and side-table rows; not its counters or flows) in
// `frames` frames, in the trace's order. For tests and benchmarks of the reading side.
std::string EncodeJournal(const Trace& trace, int32_t rank, int frames);

}  // namespace trainrx::profiler
