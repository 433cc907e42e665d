// Top-level metadata of a Kineto trace: the members around "traceEvents" -> RankInfo. The document
// reader (kineto_document.cc) keeps the text before the "traceEvents" key (header) and after the
// array (trailer); both are small, so they are parsed as one DOM document with the events replaced
// by []. SIMD-compiled with the rest of the parser.
//
// Worked example: header "\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":3,
// \"world_size\":8},", trailer ",\"baseTimeNanoseconds\":1700000000000000000}"
//   -> RankInfo{schema_version="1", declared_rank=3, world_size=8, backend="nccl",
//               base_time_ns=1700000000000000000}
#include <fmt/format.h>

#include <string>

#include "kineto_parse_internal.h"
#include "trainrx/profiler/time.h"

namespace trainrx::profiler {

Status ReadTopLevelMetadata(std::string_view header, std::string_view trailer, std::string_view source,
                                RankInfo* info) {
  std::string doc_text = "{" + std::string(header) + "\"traceEvents\":[]" + std::string(trailer);
  simdjson::dom::parser dp;
  simdjson::dom::element root;
  if (auto err = dp.parse(doc_text).get(root)) {
    const size_t last = trailer.find_last_not_of(" \t\r\n");
    if (last == std::string_view::npos || trailer[last] != '}') {
      return SourceError(source,
                         "truncated: the file ends after the traceEvents array without closing the top-level object");
    }
    return SourceError(source,
                       fmt::format("invalid JSON in the trace's top-level members: {}", simdjson::error_message(err)));
  }
  simdjson::dom::object top;
  if (root.get_object().get(top)) return SourceError(source, "top level is not an object");
  for (auto [key, value] : top) {
    if (key == "schemaVersion") {
      info->schema_version = simdjson::minify(value);
    } else if (key == "baseTimeNanoseconds") {
      // Within +-kMaxAbsTimeNs (time.h), so that adding it to the events' times cannot overflow.
      int64_t b;
      if (value.get_int64().get(b) || b > kMaxAbsTimeNs || b < -kMaxAbsTimeNs) {
        return SourceError(source, fmt::format("baseTimeNanoseconds {} is not an integer within +-2.5e18 ns",
                                               simdjson::minify(value)));
      }
      info->base_time_ns = b;
    } else if (key == "distributedInfo") {
      int64_t r, w;
      std::string_view backend;
      if (!value["rank"].get_int64().get(r)) info->declared_rank = static_cast<int32_t>(r);
      if (!value["world_size"].get_int64().get(w)) info->world_size = static_cast<int32_t>(w);
      if (!value["backend"].get_string().get(backend)) info->backend = std::string(backend);
    } else if (key == "deviceProperties") {
      simdjson::dom::array arr;
      if (value.get_array().get(arr)) continue;
      for (auto d : arr) {
        DeviceProperties p;
        int64_t x;
        std::string_view s;
        if (!d["id"].get_int64().get(x)) p.id = static_cast<int32_t>(x);
        if (!d["name"].get_string().get(s)) p.name = std::string(s);
        if (!d["totalGlobalMem"].get_int64().get(x)) p.total_global_mem = x;
        if (!d["computeMajor"].get_int64().get(x)) p.compute_major = static_cast<int32_t>(x);
        if (!d["computeMinor"].get_int64().get(x)) p.compute_minor = static_cast<int32_t>(x);
        if (!d["numSms"].get_int64().get(x)) p.num_sms = static_cast<int32_t>(x);
        info->devices.push_back(std::move(p));
      }
    } else if (key == "trainrx") {
      // Our collector's config block: {"workload": "cnn", "knobs": {...}, "probe": {...}}
      simdjson::dom::object cfg;
      if (value.get_object().get(cfg)) continue;
      for (auto [ck, cv] : cfg) info->config[std::string(ck)] = ConfigValue::Json(simdjson::minify(cv));
    } else if (key == "record_shapes" || key == "with_stack" || key == "profile_memory" ||
               key == "with_flops" || key == "with_modules" || key == "displayTimeUnit") {
      info->config[std::string(key)] = ConfigValue::Json(simdjson::minify(value));
    }
  }
  return {};
}

}  // namespace trainrx::profiler
