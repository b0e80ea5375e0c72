// Sequence classification (vLLM's `classify` and `score` pooling tasks; transformers'
// *ForSequenceClassification): the final-norm hidden state of a prompt's last token times a
// classifier matrix [num_labels, hidden], then an activation. docs/architecture.md
// "Classification and cross-encoder scores".
//
// Where the matrix comes from:
//   - a *ForSequenceClassification checkpoint's `score.weight` (Qwen3-Reranker-seq-cls,
//     Qwen2.5-1.5B-apeach, any Llama-family reward or label model);
//   - an encoder's (BertForSequenceClassification: the pooler's dense + tanh, then `classifier`;
//     (XLM-)RobertaForSequenceClassification: classifier.dense + tanh, then classifier.out_proj;
//     DistilBertForSequenceClassification: pre_classifier + ReLU, then classifier; over the
//     first token: cross-encoder/ms-marco-MiniLM-L-6-v2, bge-reranker-base, distilbert-sst-2;
//     ModernBertForSequenceClassification: classifier_pooling's first token or mean, head.dense,
//     classifier_activation, head.norm, then classifier: gte-reranker-modernbert-base);
//   - a causal LM's lm_head rows, as vLLM converts one when config.json (or --hf-overrides) names
//     a *ForSequenceClassification architecture with `classifier_from_token`:
//       method "from_2_way_softmax" (also `is_original_qwen3_reranker: true`): one label,
//         lm_head[tokens[1]] - lm_head[tokens[0]]; its sigmoid is the softmax probability of
//         tokens[1] over the two (Qwen3-Reranker's "yes" against "no", mxbai-rerank-v2's "1"
//         against "0");
//       method "no_post_processing": one label per token, its lm_head row (bge-reranker-v2-gemma).
//
// The activations are vLLM's (transformers' loss alignment): /classify applies identity for
// problem_type "regression", sigmoid for "multi_label_classification", otherwise sigmoid for one
// label and softmax for several; /score and /rerank apply the checkpoint's
// sentence-transformers cross-encoder activation (`sentence_transformers.activation_fn` or
// `sbert_ce_default_activation_function`: torch.nn.modules' Sigmoid, Identity or Softmax), or the
// /classify rule when it names none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "models/pooling.h"

namespace brigade {

class Tokenizer;

enum class ClassifierActivation { identity, sigmoid, softmax };
const char* activation_name(ClassifierActivation a);

// The activation after an encoder head's dense layer: BERT's pooler and RoBERTa's
// classifier.dense (tanh), DistilBERT's pre_classifier (relu), ModernBERT's classifier_activation
// (gelu: the exact erf GELU).
enum class DenseActivation { tanh, relu, gelu };

// What a pooling request asks of the model (vLLM's PoolingParams.task): an embedding, a
// classification (/classify), or a cross-encoder score (/score, /rerank).
enum class PoolingTask { embed, classify, score };

struct ClassifierHead {
  std::string architecture;            // as config.json (or --hf-overrides) names it
  std::string source;                  // where the matrix came from, for the log and `brigade inspect`
  int hidden = 0;
  int num_labels = 0;
  std::vector<float> weight;           // [num_labels, hidden] f32
  std::vector<float> bias;             // [num_labels] f32, or empty (decoders' score.weight has none)
  // Encoders (models/bert.h, models/modernbert.h): a dense layer [hidden, hidden] (+ bias, or
  // none: ModernBERT's classifier_bias false) and pre_activation before `weight`: BERT's pooler,
  // RoBERTa's classifier.dense (tanh); DistilBERT's pre_classifier (relu); ModernBERT's head.dense
  // (gelu), followed by a LayerNorm (pre_norm_weight [hidden], pre_norm_bias [hidden] or empty,
  // eps pre_norm_eps; ModernBERT's head.norm). Empty for decoders.
  std::vector<float> pre_weight;
  std::vector<float> pre_bias;
  DenseActivation pre_activation = DenseActivation::tanh;
  std::vector<float> pre_norm_weight;
  std::vector<float> pre_norm_bias;
  float pre_norm_eps = 1e-5f;
  // The prompt's hidden states the head reads: its last token's (decoders), its first token's
  // ([CLS], <s>: the encoders; ModernBERT's classifier_pooling "cls"), or their mean over every
  // prompt token (ModernBERT's classifier_pooling "mean").
  Pooling pooling = Pooling::last;
  std::vector<std::string> labels;     // config.json's id2label, else LABEL_<i>
  ClassifierActivation classify_activation = ClassifierActivation::softmax;
  ClassifierActivation score_activation = ClassifierActivation::softmax;
  // Cross-encoding a pair: true tokenizes (text_1, text_2) as a tokenizer pair, with the special
  // tokens its post-processor puts around and between them; false (vLLM's default for a causal LM
  // turned reranker, `use_pad_token`) tokenizes the two texts joined as one.
  bool use_pad_token = true;
  // The checkpoint has an lm_head (a causal LM converted by classifier_from_token), so the model
  // still generates; false for a *ForSequenceClassification checkpoint, which has none.
  bool generates = false;

  // weight · norm(act(pre_weight · hidden + pre_bias)) + bias (act: pre_activation; norm:
  // pre_norm_weight's LayerNorm, or none; without pre_weight: weight · hidden + bias) in f64.
  // `hidden` (the pooled hidden state) must have `hidden` values.
  std::vector<double> logits(std::span<const float> hidden_state) const;
  // The activation of `task` (classify or score) over logits, or the logits as they are when
  // use_activation is false.
  std::vector<float> outputs(std::span<const float> hidden_state, PoolingTask task, bool use_activation) const;
  std::string describe() const;  // "3 labels (neg, neu, pos) from score.weight, softmax"
};

std::vector<double> apply_activation(std::vector<double> logits, ClassifierActivation a);

// vLLM's --hf-overrides, as far as brigade applies them: a JSON object of config.json keys laid
// over the checkpoint's for the classifier (architectures, classifier_from_token, method,
// is_original_qwen3_reranker, id2label, label2id, num_labels, problem_type, use_pad_token,
// sbert_ce_default_activation_function). invalid_argument naming any other key (brigade does not
// patch the rest of config.json) or a value of the wrong type. Empty text: no overrides.
Status check_hf_overrides(std::string_view text);

// The classifier of the model at `model_path` (a Hugging Face directory; config.json with
// `hf_overrides` laid over it): nullopt for a causal LM that config.json does not turn into a
// classifier, or a path that is not such a directory (GGUF, llama2.c, synthetic:). `tokenizer`
// resolves classifier_from_token's vocabulary strings (as convert_tokens_to_ids). Errors:
// invalid_argument for bad overrides, a method without its tokens, tokens not in the vocabulary,
// or an overriding architecture of another family; corrupt for a missing or misshapen
// score.weight / lm_head; unsupported for a classifier dtype brigade cannot read.
Expected<std::optional<ClassifierHead>> read_classifier(const std::string& model_path, std::string_view hf_overrides,
                                                        const Tokenizer* tokenizer);

}  // namespace brigade
