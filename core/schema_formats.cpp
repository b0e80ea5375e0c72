#include "core/schema_formats.h"

#include <utility>

namespace brigade {

namespace {

// Year 0001-9999; Feb 29 only in leap years (divisible by 4, centuries by 400).
#define BRIGADE_DATE                                                                              \
  "(?:(?:[1-9]\\d{3}|0[1-9]\\d\\d|00[1-9]\\d|000[1-9])-"                                          \
  "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))" \
  "|(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)"
#define BRIGADE_TIME "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,9})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)"
#define BRIGADE_ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#define BRIGADE_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"

const std::pair<std::string_view, std::string_view> kFormats[] = {
    {"date", BRIGADE_DATE},
    {"time", BRIGADE_TIME},
    {"date-time", BRIGADE_DATE "T" BRIGADE_TIME},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"email", BRIGADE_ATOM "(?:\\." BRIGADE_ATOM ")*@" BRIGADE_LABEL "(?:\\." BRIGADE_LABEL ")+"},
};

#undef BRIGADE_DATE
#undef BRIGADE_TIME
#undef BRIGADE_ATOM
#undef BRIGADE_LABEL

}  // namespace

std::string_view format_regex(std::string_view format) {
  for (const auto& [name, regex] : kFormats)
    if (name == format) return regex;
  return {};
}

const std::vector<std::string_view>& enforced_formats() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& [name, regex] : kFormats) v.push_back(name);
    return v;
  }();
  return names;
}

}  // namespace brigade
