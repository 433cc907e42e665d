# cmake -DINPUT=file -DOUTPUT=file.cc -P EmbedFile.cmake: embeds a file's bytes as
# trainrx::cli::SampleTrace() (hex array; portable, no assembler tricks).
file(READ ${INPUT} _hex HEX)
string(LENGTH "${_hex}" _len)
math(EXPR _bytes "${_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _arr "${_hex}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\nnamespace trainrx::cli {\nstatic const unsigned char kData[] = {${_arr}};\nstd::string_view SampleTrace() { return {reinterpret_cast<const char*>(kData), ${_bytes}}; }\n}  // namespace trainrx::cli\n")
