// Small text helpers shared by the diagnostics parsers: reading /proc and /sys files, trimming,
// splitting and making tool output safe to store in JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wcomm::bench {

// The whole file, or nullopt when it cannot be opened or read (a missing /sys entry is
// normal: no such interface, no such counter on this kernel).
std::optional<std::string> read_text_file(const std::string& path);

// `text` without leading and trailing whitespace (Python's str.strip(): space, \t \n \v \f \r).
std::string strip_whitespace(std::string_view text);

// `text` with each invalid UTF-8 sequence replaced by U+FFFD, so nlohmann::json can dump it.
std::string valid_utf8(std::string_view text);

// Lines of `text` without their '\n' (a trailing newline does not make an empty last line).
std::vector<std::string_view> split_lines(std::string_view text);

// Whitespace-separated fields of `line`.
std::vector<std::string_view> split_fields(std::string_view line);

// A non-negative decimal integer (the whole field), or nullopt.
std::optional<unsigned long long> parse_unsigned(std::string_view field);

// A floating-point number at the start of `field` (e.g. "-52" of "-52 dBm"), or nullopt.
std::optional<double> parse_leading_double(std::string_view field);

}  // namespace wcomm::bench
