#include "models/jinja_template.h"

#include <chrono>
#include <unordered_map>

#include "models/jinja_filters.h"
#include "models/jinja_lexer.h"
#include "models/jinja_ops.h"
#include "models/jinja_parser.h"

namespace brigade::jinja {
namespace {

using Frame = std::unordered_map<std::string, Value>;
enum class Flow { normal, break_, continue_ };

std::tm local_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm out{};
  localtime_r(&t, &out);
  return out;
}

class Evaluator {
 public:
  Evaluator(const Value& context, const RenderOptions& o)
      : opt_(o),
        globals_(make_globals(o.now ? o.now : std::function<std::tm()>(local_now),
                              [this](const Value& ns) { namespaces_.push_back(ns); })) {
    frames_.emplace_back();
    if (context.is_dict())
      for (const auto& [k, v] : context.dict().items) frames_[0][k] = v;
  }

  // A namespace may hold itself (`set ns.me = ns`): emptying them all frees any cycle.
  ~Evaluator() {
    for (Value& ns : namespaces_) ns.dict().items.clear();
  }

  std::string run(const std::vector<NodePtr>& body) {
    exec_all(body);
    return std::move(out_);
  }
  int line() const { return line_; }

 private:
  struct Depth {
    explicit Depth(Evaluator& e) : e_(e) {
      if (++e_.depth_ > e_.opt_.max_depth)
        throw LimitError("the template nests deeper than " + std::to_string(e_.opt_.max_depth) + " levels (runaway recursion?)");
    }
    ~Depth() { --e_.depth_; }
    Evaluator& e_;
  };
  void step(const Node& n) {
    line_ = n.line;
    if (++steps_ > opt_.max_steps)
      throw LimitError("the template ran more than " + std::to_string(opt_.max_steps) + " steps (a runaway loop?)");
  }
  void emit(const std::string& s) {
    if (out_.size() + s.size() > opt_.max_output_bytes)
      throw LimitError("the output passed " + std::to_string(opt_.max_output_bytes) + " bytes");
    out_ += s;
  }

  // --- variables ---
  Value lookup(const std::string& name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
      auto it = f->find(name);
      if (it != f->end()) return it->second;
    }
    if (const Value* g = globals_.find(name)) return *g;
    return Value::undefined("'" + name + "' is undefined");
  }
  void assign(const std::vector<std::string>& names, const Value& v) {
    if (names.size() == 1) {
      frames_.back()[names[0]] = v;
      return;
    }
    if (!v.is_list() || v.list().size() != names.size())
      throw Error("cannot unpack " + v.type_name() + " into " + std::to_string(names.size()) + " names");
    for (size_t i = 0; i < names.size(); ++i) frames_.back()[names[i]] = v.list()[i];
  }

  // --- statements ---
  Flow exec_all(const std::vector<NodePtr>& body) {
    for (const auto& n : body) {
      const Flow f = exec(*n);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

  Flow exec(const Node& n) {
    Depth d(*this);
    step(n);
    switch (n.kind) {
      case NodeKind::text: emit(n.value.str_ref()); return Flow::normal;
      case NodeKind::output: emit(eval(*n.kids[0]).str()); return Flow::normal;
      case NodeKind::if_: return exec_all(eval(*n.kids[0]).truthy() ? n.body : n.else_body);
      case NodeKind::for_: return exec_for(n);
      case NodeKind::set: exec_set(n); return Flow::normal;
      case NodeKind::set_block: {
        Value v(capture(n.body));
        for (const auto& f : n.kids) v = apply_filter_node(*f, v);
        frames_.back()[n.name] = v;
        return Flow::normal;
      }
      case NodeKind::macro: frames_.back()[n.name] = make_macro(n); return Flow::normal;
      case NodeKind::call_block: exec_call_block(n); return Flow::normal;
      case NodeKind::filter_block: {
        Value v(capture(n.body));
        for (const auto& f : n.kids) v = apply_filter_node(*f, v);
        emit(v.str());
        return Flow::normal;
      }
      case NodeKind::break_: return Flow::break_;
      case NodeKind::continue_: return Flow::continue_;
      default: throw Error("not a statement");
    }
  }

  std::string capture(const std::vector<NodePtr>& body) {
    std::string saved = std::move(out_);
    out_.clear();
    exec_all(body);
    std::string got = std::move(out_);
    out_ = std::move(saved);
    if (out_.size() + got.size() > opt_.max_output_bytes)
      throw LimitError("the output passed " + std::to_string(opt_.max_output_bytes) + " bytes");
    return got;
  }

  void exec_set(const Node& n) {
    const Value v = eval(*n.kids[0]);
    if (n.attr.empty()) return assign(n.names, v);
    const Value target = lookup(n.names[0]);
    if (!target.is_namespace())
      throw Error("cannot assign attribute '" + n.attr + "' on '" + n.names[0] + "' (not a namespace(); use set " +
                  n.names[0] + " = namespace(...))");
    target.dict().set(n.attr, v);
  }

  Flow exec_for(const Node& n) {
    ValueList items;
    const Value seq = eval(*n.kids[0]);
    frames_.emplace_back();
    for (Value& item : seq.items_for_iteration()) {
      if (n.kids[1]) {
        assign(n.names, item);
        if (!eval(*n.kids[1]).truthy()) continue;
      }
      items.push_back(std::move(item));
    }
    const auto len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      step(n);
      assign(n.names, items[static_cast<size_t>(i)]);
      Value loop = Value::new_dict();
      ValueDict& l = loop.dict();
      l.set("index0", Value(i));
      l.set("index", Value(i + 1));
      l.set("revindex", Value(len - i));
      l.set("revindex0", Value(len - i - 1));
      l.set("first", Value(i == 0));
      l.set("last", Value(i == len - 1));
      l.set("length", Value(len));
      l.set("depth", Value(1));
      l.set("depth0", Value(0));
      l.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
      l.set("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
      l.set("cycle", Value([i](CallArgs& a) {
        if (a.args.empty()) throw Error("loop.cycle takes at least one value");
        return a.args[static_cast<size_t>(i) % a.args.size()];
      }, "cycle"));
      frames_.back()["loop"] = loop;
      if (exec_all(n.body) == Flow::break_) break;
    }
    frames_.pop_back();
    if (len == 0) return exec_all(n.else_body);
    return Flow::normal;
  }

  struct MacroDef {
    std::string name;
    std::vector<std::pair<std::string, const Node*>> params;  // name, default (may be null)
    const std::vector<NodePtr>* body;
    std::vector<Frame> closure;  // the scopes below the top level where it was defined
  };

  // A macro as a callable value. A `caller` keyword argument (from a call block) becomes the
  // macro's caller(); the body sees the top-level variables, the scopes it was defined in (a
  // loop's variables, for a call block's body) and its parameters.
  Value make_macro(MacroDef def) {
    return Value([this, def](CallArgs& a) {
      Depth d(*this);
      Frame frame;
      for (size_t i = 0; i < def.params.size(); ++i) {
        const auto& [name, dflt] = def.params[i];
        const Value* given = nullptr;
        for (const auto& [k, v] : a.kwargs)
          if (k == name) given = &v;
        if (!given && i < a.args.size()) given = &a.args[i];
        frame[name] = given ? *given : dflt ? eval(*dflt) : Value::undefined("parameter '" + name + "' was not given");
      }
      ValueList varargs;
      for (size_t i = def.params.size(); i < a.args.size(); ++i) varargs.push_back(a.args[i]);
      frame["varargs"] = Value::tuple(std::move(varargs));
      for (const auto& [k, v] : a.kwargs)
        if (k == "caller") frame["caller"] = v;
      std::vector<Frame> saved = std::move(frames_);
      frames_.clear();
      frames_.push_back(std::move(saved.front()));
      frames_.insert(frames_.end(), def.closure.begin(), def.closure.end());
      frames_.push_back(std::move(frame));
      std::string text;
      try {
        text = capture(*def.body);
      } catch (...) {
        saved.front() = std::move(frames_.front());
        frames_ = std::move(saved);
        throw;
      }
      saved.front() = std::move(frames_.front());  // top-level assignments the macro made stay
      frames_ = std::move(saved);
      return Value(std::move(text));
    }, def.name);
  }
  Value make_macro(const Node& n) {
    MacroDef def{n.name, {}, &n.body, {frames_.begin() + 1, frames_.end()}};
    for (const auto& [name, dflt] : n.kwargs) def.params.emplace_back(name, dflt.get());
    return make_macro(std::move(def));
  }

  void exec_call_block(const Node& n) {
    const Node& call = *n.kids[0];
    const Value callee = eval(*call.kids[0]);
    if (!callee.is_function()) throw Error("{% call %} needs a macro, got '" + callee.type_name() + "'");
    MacroDef caller{"caller", {}, &n.body, {frames_.begin() + 1, frames_.end()}};
    for (const auto& p : n.names) caller.params.emplace_back(p, nullptr);
    CallArgs args = eval_args(call, 1);
    args.kwargs.emplace_back("caller", make_macro(std::move(caller)));
    emit(callee.call(args).str());
  }

  // --- expressions ---
  CallArgs eval_args(const Node& n, size_t first) {
    CallArgs a;
    for (size_t i = first; i < n.kids.size(); ++i) a.args.push_back(eval(*n.kids[i]));
    for (const auto& [k, v] : n.kwargs) a.kwargs.emplace_back(k, eval(*v));
    return a;
  }
  Value apply_filter_node(const Node& f, const Value& input) {
    CallArgs a = eval_args(f, 1);
    return apply_filter(f.name, input, a);
  }

  Value eval(const Node& n) {
    Depth d(*this);
    step(n);
    switch (n.kind) {
      case NodeKind::literal: return n.value;
      case NodeKind::name: return lookup(n.name);
      case NodeKind::list: {
        ValueList l;
        for (const auto& k : n.kids) l.push_back(eval(*k));
        return n.name == "tuple" ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case NodeKind::dict: {
        Value dict = Value::new_dict();
        for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
          const Value k = eval(*n.kids[i]);
          if (!k.is_string()) throw Error("dict keys must be strings here, got '" + k.type_name() + "'");
          dict.dict().set(k.str_ref(), eval(*n.kids[i + 1]));
        }
        return dict;
      }
      case NodeKind::attr: return get_attr(eval(*n.kids[0]), n.name);
      case NodeKind::item: {
        const Value obj = eval(*n.kids[0]);
        return get_item(obj, eval(*n.kids[1]));
      }
      case NodeKind::slice: {
        const Value obj = eval(*n.kids[0]);
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (n.kids[1 + i]) parts[i] = eval(*n.kids[1 + i]);
        return slice(obj, n.kids[1] ? &parts[0] : nullptr, n.kids[2] ? &parts[1] : nullptr, n.kids[3] ? &parts[2] : nullptr);
      }
      case NodeKind::call: {
        const Value callee = eval(*n.kids[0]);
        CallArgs a = eval_args(n, 1);
        if (callee.is_undefined()) throw Error(callee.undefined_message());
        if (!callee.is_function()) throw Error("'" + callee.type_name() + "' object is not callable");
        return callee.call(a);
      }
      case NodeKind::filter: return apply_filter_node(n, eval(*n.kids[0]));
      case NodeKind::test: {
        const Value v = eval(*n.kids[0]);
        CallArgs a = eval_args(n, 1);
        return Value(apply_test(n.name, v, a) != n.negated);
      }
      case NodeKind::unary: {
        const Value v = require_defined(eval(*n.kids[0]));
        if (!v.is_number()) throw Error("bad operand type for unary " + n.name + ": '" + v.type_name() + "'");
        if (n.name == "+") return v.kind() == Kind::boolean ? Value(v.as_int()) : v;
        return v.kind() == Kind::floating ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case NodeKind::binary: {
        const Value a = eval(*n.kids[0]);
        return binary_op(n.name, a, eval(*n.kids[1]));
      }
      case NodeKind::logic_and: {
        Value a = eval(*n.kids[0]);
        return a.truthy() ? eval(*n.kids[1]) : a;
      }
      case NodeKind::logic_or: {
        Value a = eval(*n.kids[0]);
        return a.truthy() ? a : eval(*n.kids[1]);
      }
      case NodeKind::logic_not: return Value(!eval(*n.kids[0]).truthy());
      case NodeKind::compare: {
        Value left = eval(*n.kids[0]);
        for (size_t i = 0; i < n.names.size(); ++i) {
          Value right = eval(*n.kids[i + 1]);
          if (!compare_op(n.names[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case NodeKind::cond:
        if (eval(*n.kids[1]).truthy()) return eval(*n.kids[0]);
        return n.kids[2] ? eval(*n.kids[2]) : Value::undefined("the conditional expression had no else branch");
      default: throw Error("not an expression");
    }
  }

 private:
  const RenderOptions& opt_;
  ValueDict globals_;
  std::vector<Frame> frames_;
  std::vector<Value> namespaces_;
  std::string out_;
  int64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;
};

}  // namespace

Expected<JinjaTemplate> JinjaTemplate::parse(const std::string& source) {
  try {
    auto body = std::make_shared<std::vector<NodePtr>>(jinja::parse(lex(source)));
    JinjaTemplate t;
    t.body_ = std::move(body);
    return t;
  } catch (const Error& e) {
    return invalid_argument(std::string("chat template does not parse: ") + e.what());
  }
}

Expected<std::string> JinjaTemplate::render(const Value& context, const RenderOptions& options) const {
  Evaluator ev(context, options);
  try {
    return ev.run(*body_);
  } catch (const RaisedError& e) {
    return invalid_argument(std::string("the chat template refused the request: ") + e.what());
  } catch (const LimitError& e) {
    return out_of_resources("chat template: line " + std::to_string(ev.line()) + ": " + e.what());
  } catch (const Error& e) {
    return invalid_argument("chat template: line " + std::to_string(ev.line()) + ": " + e.what());
  }
}

}  // namespace brigade::jinja
