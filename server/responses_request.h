// OpenAI's Responses API request (POST /v1/responses) → the chat completions request it means.
//
// brigade serves the Responses API as a view of its chat path: the body is rewritten into a
// chat completions body (input items → messages, flat function tools → chat tools, text.format →
// response_format, max_output_tokens → max_tokens), which parse_completion_request then checks
// like any chat request; ResponsesState (server/responses_state.h) turns the chat output back
// into Responses items and events. So templates, tool calls, reasoning and structured output
// behave exactly as in chat.
//
// Stateless: brigade keeps no responses, so `previous_response_id`, `conversation`, item
// references and `background` are refused (send the conversation in `input`, as the items of
// the earlier responses); `store` is accepted and every response says `store: false`.
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace brigade::server {

// The chat completions body for a Responses body. invalid_argument names the Responses field
// that is wrong; unsupported names what brigade does not do (images, built-in tools, stored
// state). Input items: messages (roles user, system, developer, assistant; content a string or
// input_text/output_text parts), function_call (an assistant's call) and function_call_output
// (its result); a reasoning item becomes the reasoning of the assistant turn after it (the
// template renders or drops it, as for chat's reasoning_content).
// The body keeps its key order (ordered_json): tools and a json_schema reach the template and the
// output in the client's order, as chat's do.
Expected<nlohmann::ordered_json> responses_to_chat(const nlohmann::ordered_json& body);

// The request fields a Response object echoes (instructions, tools, tool_choice, text, ...),
// with OpenAI's defaults for those the body left out.
nlohmann::ordered_json responses_echo(const nlohmann::ordered_json& body);

}  // namespace brigade::server
