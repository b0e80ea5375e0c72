// The JSON Schema `format` values brigade enforces, as regexes (core/regex_syntax.h syntax) over
// the decoded string: date, time and date-time (RFC 3339 full-date, full-time, date-time: the
// calendar is exact, leap years included; seconds 00-59, fractions of 1-9 digits, an offset
// 'Z' or +hh:mm/-hh:mm required), uuid (RFC 4122 text, either case) and email (an RFC 5322
// dot-atom local part @ a host name of two or more labels; no quoted local parts, no IP
// literals). Each accepts a subset of the valid values, never an invalid one
// (tests/core/schema_pattern_test.cpp checks that against Python's parsers).
#pragma once

#include <string_view>
#include <vector>

namespace brigade {

// The regex of `format`, or empty when brigade does not enforce it (it stays an annotation).
std::string_view format_regex(std::string_view format);
// The formats format_regex knows.
const std::vector<std::string_view>& enforced_formats();

}  // namespace brigade
