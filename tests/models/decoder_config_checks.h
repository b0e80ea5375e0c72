// Config checks shared by the tests of the Llama decoder's relatives (classic_decoders_test.cpp,
// llama_relatives_test.cpp): a fixture's config.json parsed as edited, a refusal naming what was
// refused, and the pieces `inspect` names.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hf_fixture.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade::testing {

using ConfigEdit = std::function<void(nlohmann::json&)>;

// The fixture `name`'s config.json, edited by `edit` (if any), as parse_hf_config reads it.
inline Expected<ModelConfig> parse_fixture(const std::string& name, const ConfigEdit& edit = {}) {
  auto j = nlohmann::json::parse(read_text_file(fixture_dir(name) + "/config.json").value());
  if (edit) edit(j);
  return parse_hf_config(j.dump());
}

// The fixture's config, edited, is refused with a message containing `what`.
inline void expect_config_refused(const std::string& name, const ConfigEdit& edit, const std::string& what) {
  auto c = parse_fixture(name, edit);
  ASSERT_FALSE(c.has_value()) << name << ": " << what;
  EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().message();
}

// `inspect` of each fixture names each of its pieces.
inline void expect_inspect_names(const std::vector<std::pair<std::string, std::vector<std::string>>>& want) {
  for (const auto& [name, pieces] : want) {
    auto info = inspect_model(fixture_dir(name));
    ASSERT_TRUE(info.has_value()) << info.status().to_string();
    const std::string text = format_model_info(*info);
    for (const std::string& piece : pieces) EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
  }
}

}  // namespace brigade::testing
