// `brigade generate`: one request through the embedded engine, streamed to stdout.
#include "tools/commands.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "brigade/engine.h"

namespace brigade::tools {

namespace {

Expected<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return invalid_argument("--prompt-ids: '" + item + "' is not an integer token id (expected e.g. 1,2,3)");
    }
  }
  if (ids.empty()) return invalid_argument("--prompt-ids is empty (expected e.g. 1,2,3)");
  return ids;
}

// --beam-width: Engine::beam_search, then each beam on its own line, best first:
// "beam K (score S, logprob L, FINISH): TEXT" (token ids for an --prompt-ids prompt).
int run_beam_search(Engine& engine, const GenerateArgs& a, const GenerateOptions& req) {
  if (a.json_object || !a.json_schema_file.empty() || !a.regex.empty() || !a.grammar_file.empty() || a.score ||
      !a.images.empty() || a.min_tokens > 0)
    return fail(invalid_argument("--beam-width runs a beam search, which takes no structured output, --score, "
                                 "--image or --min-tokens"));
  BeamSearchOptions o;
  o.prompt = req.prompt;
  o.prompt_ids = req.prompt_ids;
  o.beam_width = a.beam_width;
  o.max_tokens = a.max_tokens;
  o.length_penalty = a.length_penalty;
  o.early_stopping = a.early_stopping == "true"    ? EarlyStopping::on
                     : a.early_stopping == "never" ? EarlyStopping::never
                                                   : EarlyStopping::heuristic;
  o.ignore_eos = a.ignore_eos;
  auto result = engine.beam_search(o);
  if (!result) return fail(result.status());
  for (size_t k = 0; k < result->beams.size(); ++k) {
    const Beam& b = result->beams[k];
    std::printf("beam %zu (score %.4f, logprob %.4f, %s):", k, b.score, b.cumulative_logprob, finish_reason_name(b.finish));
    if (req.prompt_ids.empty()) {
      std::printf(" %s%s\n", req.prompt.c_str(), b.text.c_str());
    } else {
      for (int32_t t : b.token_ids) std::printf(" %d", t);
      std::printf("\n");
    }
  }
  std::fprintf(stderr, "[beam search: %d steps]\n", result->steps);
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("generate", "Generate text (or token ids) from a prompt");
  auto opts = std::make_shared<GenerateArgs>();
  cmd->add_option("--model", opts->model, "Checkpoint: a directory (config.json + safetensors), a .gguf file or a llama2.c .bin")->required();
  cmd->add_option("--tokenizer", opts->tokenizer,
                  "Tokenizer (and its chat template) from this directory or file instead of the model's (vLLM's flag)");
  cmd->add_option("--prompt", opts->prompt, "Prompt text");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt token ids, comma-separated; prints generated ids");
  cmd->add_option("--max-tokens", opts->max_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", opts->temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", opts->top_p, "Nucleus sampling mass in (0, 1]")->capture_default_str();
  cmd->add_option("--top-k", opts->top_k, "0 = off")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed (same seed, same tokens)");
  cmd->add_option("--topology", opts->topology, "Topology YAML (default: one CPU executor)");
  cmd->add_option("--threads", opts->threads, "CPU threads (0 = all cores)")->capture_default_str();
  add_executor_flags(cmd, opts->executor);
  add_launch_flag(cmd, opts->launch_nodes);
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "Keep generating past end-of-sequence");
  cmd->add_option("--min-tokens", opts->min_tokens, "No end-of-sequence before this many tokens")->capture_default_str();
  auto* json_object = cmd->add_flag("--json-object", opts->json_object, "The output is one JSON object (enforced token by token)");
  auto* json_schema = cmd->add_option("--json-schema", opts->json_schema_file,
                                      "A JSON Schema file: the output is an instance of it (enforced token by token)")
                          ->excludes(json_object);
  auto* regex = cmd->add_option("--regex", opts->regex,
                                "A regex (Python re syntax) the whole output matches (enforced token by token; vLLM's guided_regex)")
                    ->excludes(json_object)
                    ->excludes(json_schema);
  cmd->add_option("--grammar", opts->grammar_file,
                  "A GBNF grammar file (llama.cpp's format): the whole output derives from its root rule (enforced "
                  "token by token; llama.cpp's --grammar-file, vLLM's guided_grammar)")
      ->excludes(json_object)
      ->excludes(json_schema)
      ->excludes(regex);
  cmd->add_option("--image", opts->images,
                  "A PNG or JPEG file for a model with a vision tower (Gemma 3 / 4, the Qwen-VL family, Mistral 3, "
                  "LLaVA / LLaVA-NeXT / LLaVA-OneVision, InternVL, Idefics3 / SmolVLM, Aya Vision, GLM-4.xV); repeat for several. A text prompt "
                  "places each with the model's image marker (<start_of_image>, <|image_pad|>, [IMG], <image>, "
                  "<IMG_CONTEXT>, ...), the k-th marker the k-th image, expanded to the image's tokens as the "
                  "model's processor does (for a prompt of all the --image files)");
  cmd->add_option("--beam-width", opts->beam_width,
                  "Beam search of this width (transformers' num_beams): prints every beam, best first");
  cmd->add_option("--length-penalty", opts->length_penalty, "Beam search: score = logprob / length^this")
      ->capture_default_str();
  cmd->add_option("--early-stopping", opts->early_stopping, "Beam search: false, true or never")
      ->check(CLI::IsMember({"false", "true", "never"}))
      ->capture_default_str();
  cmd->add_flag("--score", opts->score,
                 "Print the prompt's log-likelihood and perplexity (its prompt logprobs); --max-tokens 0 scores only");
  cmd->callback([opts, &run] { run = [opts] { return run_generate(*opts); }; });
}

int run_generate(const GenerateArgs& a) {
  if (a.prompt.empty() == a.prompt_ids.empty()) return fail(invalid_argument("give exactly one of --prompt or --prompt-ids"));
  auto options = engine_options(a.topology, a.model, a.threads);
  if (!options) return fail(options.status());
  options->tokenizer_path = a.tokenizer;
  if (Status st = apply_executor_flags(a.executor, *options); !st.is_ok()) return fail(st);
  auto nodes = launch_nodes(a.launch_nodes, a.topology, *options, a.threads, a.executor);
  if (!nodes) return fail(nodes.status());
  auto engine = Engine::create(*options);
  if (!engine) return fail(engine.status());

  GenerateOptions req;
  req.prompt = a.prompt;
  if (!a.prompt_ids.empty()) {
    auto ids = parse_ids(a.prompt_ids);
    if (!ids) return fail(ids.status());
    req.prompt_ids = *ids;
  }
  req.max_tokens = a.max_tokens;
  req.sampling.temperature = a.temperature;
  req.sampling.top_p = a.top_p;
  req.sampling.top_k = a.top_k;
  if (a.seed) req.sampling.seed = *a.seed;
  req.ignore_eos = a.ignore_eos;
  req.min_tokens = a.min_tokens;
  if (a.score) req.prompt_logprobs = 0;
  if (a.json_object) req.response_format = ResponseFormat::json_object;
  if (!a.json_schema_file.empty()) {
    std::ifstream in(a.json_schema_file, std::ios::binary);
    if (!in) return fail(not_found("cannot read the --json-schema file " + a.json_schema_file));
    req.json_schema.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    req.response_format = ResponseFormat::json_schema;
  }
  if (!a.regex.empty()) {
    req.regex = a.regex;
    req.response_format = ResponseFormat::regex;
  }
  if (!a.grammar_file.empty()) {
    std::ifstream in(a.grammar_file, std::ios::binary);
    if (!in) return fail(not_found("cannot read the --grammar file " + a.grammar_file));
    req.grammar.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    req.response_format = ResponseFormat::grammar;
  }

  for (const std::string& path : a.images) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(not_found("cannot read the --image file " + path));
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto pixels = (*engine)->load_image(bytes, static_cast<int>(a.images.size()));
    if (!pixels) return fail(Status(pixels.status().code(), "--image " + path + ": " + pixels.status().message()));
    req.images.push_back(std::move(*pixels));
  }

  if (a.beam_width > 0) return run_beam_search(**engine, a, req);
  const bool ids_mode = !req.prompt_ids.empty();
  if (!ids_mode) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids;
  Event last;
  std::vector<PromptLogprob> scored;
  Status st = run_to_end(**engine, req, [&](const Event& ev) {
    if (!ev.prompt_logprobs.empty()) scored = ev.prompt_logprobs;
    ids.insert(ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (!ids_mode && !ev.text.empty()) {
      std::fputs(ev.text.c_str(), stdout);
      std::fflush(stdout);
    }
    last = ev;
  });
  if (!st.is_ok()) return fail(st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ids_mode) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (last.finish == FinishReason::error) return fail(invalid_argument(last.error));
  std::fprintf(stderr, "[%zu tokens in %.2f s, %.1f tokens/s, finish: %s]\n", ids.size(), secs,
               static_cast<double>(ids.size()) / secs, finish_reason_name(last.finish));
  if (a.score && scored.size() > 1) {
    // The first token has no logprob (nothing precedes it): n - 1 tokens are scored.
    double sum = 0.0;
    for (const PromptLogprob& p : scored) sum += p.logprob.value_or(0.0f);
    const double n = static_cast<double>(scored.size() - 1);
    std::fprintf(stderr, "[prompt: %zu tokens, log-likelihood %.4f, %.4f per token, perplexity %.4f]\n", scored.size(),
                 sum, sum / n, std::exp(-sum / n));
  }
  return 0;
}

}  // namespace brigade::tools
