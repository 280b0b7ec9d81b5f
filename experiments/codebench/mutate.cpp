#include "experiments/codebench/mutate.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <stdexcept>

namespace ponder::codebench {
namespace codebench_mutate {
namespace {

enum class Tok { Name, Number, String, Op, Comment, LineEnd, End };

struct Token {
  Tok kind;
  size_t begin, end;
  int depth;        // open brackets around it
  bool line_start;  // the first token of a logical line
};

// One replacement of source[begin, end).
struct Edit {
  size_t begin, end;
  std::string text;
};

bool name_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

// Length of a string literal starting at i (after its prefix letters), or 0 when no quote is there. Escapes are
// skipped in raw strings too: for finding where a literal ends they behave the same.
size_t string_length(const std::string& s, size_t i) {
  if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return 0;
  const char q = s[i];
  const bool triple = s.compare(i, 3, std::string(3, q)) == 0;
  size_t j = i + (triple ? 3 : 1);
  while (j < s.size()) {
    if (s[j] == '\\') j += 2;
    else if (triple && s.compare(j, 3, std::string(3, q)) == 0) return j + 3 - i;
    else if (!triple && (s[j] == q || s[j] == '\n')) return j + 1 - i;
    else ++j;
  }
  return s.size() - i;
}

size_t number_length(const std::string& s, size_t i) {
  const bool based = s[i] == '0' && i + 1 < s.size() && s[i + 1] != '\0' && std::strchr("xXoObB", s[i + 1]);  // 0x1e+5 is 0x1e plus 5
  size_t j = i;
  while (j < s.size()) {
    const char c = s[j];
    const bool exponent_sign = !based && (c == '+' || c == '-') && j > i && (s[j - 1] == 'e' || s[j - 1] == 'E');
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || exponent_sign)) break;
    ++j;
  }
  return j - i;
}

size_t operator_length(const std::string& s, size_t i) {
  static const char* three[] = {"**=", "//=", ">>=", "<<=", "..."};
  static const char* two[] = {"->", ":=", "==", "!=", "<=", ">=", "<<", ">>", "**", "//", "+=", "-=",
                              "*=", "/=", "%=", "&=", "|=", "^=", "@="};
  for (const char* op : three)
    if (s.compare(i, 3, op) == 0) return 3;
  for (const char* op : two)
    if (s.compare(i, 2, op) == 0) return 2;
  return 1;
}

// Python's tokens as far as the mutations need them: names, numbers, strings (with prefixes, triple quotes,
// escapes), operators, comments, and the ends of logical lines (a newline outside brackets, no backslash before).
std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  int depth = 0;
  bool line_start = true;
  auto push = [&](Tok kind, size_t b, size_t e) {
    out.push_back({kind, b, e, depth, line_start && kind != Tok::Comment && kind != Tok::LineEnd});
    if (kind != Tok::Comment) line_start = kind == Tok::LineEnd;
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\' && (s.compare(i + 1, 1, "\n") == 0 || s.compare(i + 1, 2, "\r\n") == 0)) {
      i += s[i + 1] == '\n' ? 2 : 3;  // a continued line
    } else if (c == '\n') {
      if (depth == 0) push(Tok::LineEnd, i, i + 1);
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
    } else if (c == '#') {
      const size_t e = std::min(s.find('\n', i), s.size());
      push(Tok::Comment, i, e);
      i = e;
    } else if (name_char(c) && !std::isdigit(c)) {
      size_t e = i;
      while (e < s.size() && name_char(static_cast<unsigned char>(s[e]))) ++e;
      const size_t quoted = e - i <= 2 ? string_length(s, e) : 0;  // a prefix such as r, b, f, rb
      const bool prefix = quoted && std::all_of(s.begin() + long(i), s.begin() + long(e),
                                                [](char p) { return std::strchr("rRbBuUfF", p) != nullptr; });
      push(prefix ? Tok::String : Tok::Name, i, prefix ? e + quoted : e);
      i = prefix ? e + quoted : e;
    } else if (c == '\'' || c == '"') {
      const size_t e = i + string_length(s, i);
      push(Tok::String, i, e);
      i = e;
    } else if (std::isdigit(c) || (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      const size_t e = i + number_length(s, i);
      push(Tok::Number, i, e);
      i = e;
    } else {
      const size_t e = i + operator_length(s, i);
      if (std::strchr(")]}", c) && depth > 0) --depth;
      push(Tok::Op, i, e);
      if (std::strchr("([{", c)) ++depth;
      i = e;
    }
  }
  push(Tok::End, s.size(), s.size());
  return out;
}

std::string text_of(const std::string& s, const Token& t) { return s.substr(t.begin, t.end - t.begin); }

// `return X`: X becomes None (a bare return, or one already returning None, is no site).
std::vector<Edit> return_sites(const std::string& s, const std::vector<Token>& t) {
  std::vector<Edit> edits;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    if (t[i].kind != Tok::Name || text_of(s, t[i]) != "return") continue;
    size_t end = 0;
    for (size_t j = i + 1; j < t.size(); ++j) {
      const bool semicolon = t[j].kind == Tok::Op && t[j].depth == t[i].depth && text_of(s, t[j]) == ";";
      if (t[j].kind == Tok::LineEnd || t[j].kind == Tok::End || semicolon) break;
      if (t[j].kind != Tok::Comment) end = t[j].end;
    }
    // From the keyword's end, with a space: `return(x)` must not become `returnNone`.
    if (end > t[i + 1].begin && s.compare(t[i + 1].begin, end - t[i + 1].begin, "None") != 0)
      edits.push_back({t[i].end, end, " None"});
  }
  return edits;
}

// `if C:`, `elif C:`, `while C:` as statements: C becomes not (C).
std::vector<Edit> condition_sites(const std::string& s, const std::vector<Token>& t) {
  std::vector<Edit> edits;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    if (t[i].kind != Tok::Name || !t[i].line_start) continue;
    const std::string kw = text_of(s, t[i]);
    if (kw != "if" && kw != "elif" && kw != "while") continue;
    for (size_t j = i + 1; j < t.size() && t[j].kind != Tok::LineEnd; ++j) {
      if (t[j].kind == Tok::Op && t[j].depth == t[i].depth && text_of(s, t[j]) == ":") {
        if (j > i + 1) {  // from the keyword's end, with a space: `if(x):` must not become `ifnot (...)`
          const size_t b = t[i + 1].begin, e = t[j - 1].end;
          edits.push_back({t[i].end, e, " not (" + s.substr(b, e - b) + ")"});
        }
        break;
      }
    }
  }
  return edits;
}

std::vector<Edit> comparison_sites(const std::string& s, const std::vector<Token>& t) {
  static const std::map<std::string, std::string> negation = {{"<", ">="}, {">", "<="}, {"<=", ">"},
                                                               {">=", "<"}, {"==", "!="}, {"!=", "=="}};
  std::vector<Edit> edits;
  for (const Token& k : t)
    if (k.kind == Tok::Op)
      if (auto it = negation.find(text_of(s, k)); it != negation.end()) edits.push_back({k.begin, k.end, it->second});
  return edits;
}

// Decimal integer literals (not 0x.., floats, or 007, which Python rejects anyway) plus one, as decimal text.
std::vector<Edit> integer_sites(const std::string& s, const std::vector<Token>& t) {
  std::vector<Edit> edits;
  for (const Token& k : t) {
    if (k.kind != Tok::Number) continue;
    std::string n = text_of(s, k);
    if (!std::all_of(n.begin(), n.end(), ::isdigit) || (n.size() > 1 && n[0] == '0')) continue;
    size_t i = n.size();
    while (i > 0 && n[i - 1] == '9') n[--i] = '0';
    if (i == 0) n.insert(n.begin(), '1');
    else ++n[i - 1];
    edits.push_back({k.begin, k.end, n});
  }
  return edits;
}

std::string apply(std::string s, std::vector<Edit> edits) {
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.begin > b.begin; });
  for (const Edit& e : edits) s.replace(e.begin, e.end - e.begin, e.text);
  return s;
}

}  // namespace
}  // namespace codebench_mutate

const std::vector<std::string>& mutation_operators() {
  using namespace codebench_mutate;
  static const std::vector<std::string> order = {"return-none", "negate-condition", "negate-comparison", "int-plus-one"};
  return order;
}

Mutant mutate(const std::string& source, const std::vector<std::string>& order) {
  using namespace codebench_mutate;
  const std::vector<Token> tokens = tokenize(source);
  for (const std::string& op : order) {
    std::vector<Edit> edits;
    if (op == "return-none") edits = return_sites(source, tokens);
    else if (op == "negate-condition") edits = condition_sites(source, tokens);
    else if (op == "negate-comparison") edits = comparison_sites(source, tokens);
    else if (op == "int-plus-one") edits = integer_sites(source, tokens);
    else throw std::invalid_argument("unknown mutation operator '" + op + "' (return-none, negate-condition, "
                                     "negate-comparison, int-plus-one)");
    if (!edits.empty()) return {op, int(edits.size()), apply(source, edits)};
  }
  return {"", 0, source};
}

}  // namespace ponder::codebench
