#include "experiments/study/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "experiments/study/result_util.h"

namespace ponder::cli {
namespace {

std::ofstream open_out(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  return f;
}

std::string html_escape(char c) {
  switch (c) {
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '&': return "&amp;";
    case '"': return "&quot;";
    case '\n': return "↵<br>";
    default: return std::string(1, c);
  }
}

}  // namespace

size_t utf8_char_length(const std::vector<int32_t>& bytes, size_t i) {
  const int32_t b = bytes[i];
  const size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || i + n > bytes.size()) return 0;
  for (size_t j = 1; j < n; ++j)
    if ((bytes[i + j] & 0xC0) != 0x80) return 0;
  return n;
}

void run_gnuplot(const std::string& script) {
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("gnuplot failed on " + script + " (is gnuplot installed? scripts/setup.sh installs it)");
}

namespace {
// Runs one of scripts/ with Debian's interpreter, where scripts/setup.sh installs matplotlib (another python3 on
// PATH may lack it); `args` are already quoted. A failure is an error naming the script and what it read.
void run_plot_script(const std::string& script, const std::string& args, const std::string& input) {
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = python + " '" + std::string(PONDER_SOURCE_ROOT) + "/scripts/" + script + "' " + args + " 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("scripts/" + script + " failed on " + input +
                             " (is python3-matplotlib installed? scripts/setup.sh installs it)");
}
}  // namespace

void write_compare_figures(const std::string& dir) {
  run_plot_script("plot_compare.py", "'" + dir + "'", dir + "/results.json");
}

void write_training_figure(const std::string& png, const std::vector<std::pair<std::string, std::string>>& logs) {
  std::string args = "'" + png + "'";
  for (const auto& [label, log] : logs) args += " '" + label + "=" + log + "'";
  run_plot_script("plot_training.py", args, logs.empty() ? png : logs.front().second);
}

void write_k_hist(const CompareResult& r, const std::vector<int>& options, const std::string& dir) {
  {
    std::ofstream f = open_out(dir + "/k_hist.dat");
    f << "method";
    for (int k : options) f << " K=" << k;
    f << '\n';
    for (const MethodResult& m : r.methods) {
      int64_t total = 0;
      for (int64_t c : m.k_hist) total += c;
      f << '"' << m.name << '"';
      for (size_t i = 0; i < options.size(); ++i)
        f << ' ' << (total ? double(i < m.k_hist.size() ? m.k_hist[i] : 0) / double(total) : 0.0);
      f << '\n';
    }
  }
  std::ofstream g = open_out(dir + "/k_hist.gp");
  g << "set terminal pngcairo size 900,500 font ',10'\nset output '" << dir << "/k_hist.png'\n"
    << "set title 'Share of units per inner step count K'\nset style data histograms\n"
    << "set style histogram rowstacked\nset style fill solid 0.8 border -1\nset boxwidth 0.7\n"
    << "set ylabel 'share of units'\nset yrange [0:1]\nset xtics rotate by -35\nset key outside right\n"
    << "plot for [c=2:" << options.size() + 1 << "] '" << dir << "/k_hist.dat' using c:xtic(1) title columnheader(c)\n";
  g.close();
  run_gnuplot(dir + "/k_hist.gp");
}

namespace {

const std::map<int, std::string>& k_colours() {
  static const std::map<int, std::string> c = {{0, "#f2f2f2"}, {1, "#cfe3f7"}, {2, "#8fc1ee"}, {3, "#c6a8e0"},
                                               {4, "#f5b971"}, {8, "#e8604c"}};
  return c;
}

// One method's passage: one span per character, not per byte (a multi-byte UTF-8 character split over spans shows
// as '�'). A character takes the colour of the unit of its first byte; a byte that starts no valid character shows
// as U+FFFD. The tooltip gives the unit, its K and the bits spent predicting the character (the losses of its bytes,
// each predicted at the position before it; the first byte of the passage has none).
void passage_html(std::ostream& f, const CompareResult& r, const MethodResult& m, size_t shown) {
  const std::vector<int32_t>& t = r.passage_tokens;
  for (size_t i = 0; i < shown;) {
    const size_t n = utf8_char_length(t, i), len = std::max<size_t>(n, 1);
    const size_t u = i / size_t(r.mini_batch);
    const int k = u < m.passage_k.size() ? m.passage_k[u] : -1;
    double bits = 0;
    bool scored = i > 0 && i - 1 + len <= m.passage_loss.size();
    for (size_t j = i; scored && j < i + len; ++j) bits += m.passage_loss[j - 1] / std::log(2.0);
    std::string text;
    if (n <= 1)
      text = n == 1 ? html_escape(char(t[i])) : "\xEF\xBF\xBD";
    else
      for (size_t j = 0; j < n; ++j) text += char(t[i + j]);
    const auto it = k_colours().find(k);
    f << "<span title='unit " << u << ", K=" << k << (scored ? ", " + fmt("%.2f", bits) + " bits" : std::string())
      << "' style='background:" << (it != k_colours().end() ? it->second : "#fff") << "'>" << text << "</span>";
    i += len;
  }
}

}  // namespace

void write_tokens_html(const CompareResult& r, const std::vector<std::string>& methods, const std::string& path) {
  std::vector<const MethodResult*> ms;
  for (const std::string& name : methods) {
    const auto it = std::find_if(r.methods.begin(), r.methods.end(), [&](const MethodResult& x) { return x.name == name; });
    if (it == r.methods.end()) throw std::invalid_argument("tokens view: no method named '" + name + "'");
    ms.push_back(&*it);
  }
  // Streams are padded with token 0 after their last scored position; a passage this long is cut for the browser.
  const size_t cap = 16384;
  size_t shown = r.passage_tokens.size();
  while (shown > 0 && r.passage_tokens[shown - 1] == 0) --shown;
  const bool cut = shown > cap;
  shown = std::min(shown, cap);
  while (shown > 0 && shown < r.passage_tokens.size() && (r.passage_tokens[shown] & 0xC0) == 0x80)
    --shown;  // do not end inside a character (the cut lands on a continuation byte)
  std::ofstream f = open_out(path);
  f << "<!doctype html><meta charset='utf-8'><title>Steps per token</title>\n<style>body{font-family:sans-serif}"
    << "pre{white-space:pre-wrap;font-size:14px;line-height:1.6;margin:0}span{padding:1px 0}"
    << ".cols{display:grid;grid-template-columns:repeat(" << ms.size() << ",minmax(0,1fr));gap:1.5em}</style>\n"
    << "<h1>Inner steps per token</h1>\n<p>A held-out passage (the first evaluation window of seed 0, or the first "
    << "stream; " << shown << " bytes" << (cut ? ", cut from " + std::to_string(r.passage_tokens.size()) : std::string())
    << "). Each character is coloured by the number of inner TTT steps K its unit of " << r.mini_batch
    << " tokens received; hover over a character for its unit, K and the bits spent predicting it. Legend: ";
  for (const auto& [k, c] : k_colours()) f << "<span style='background:" << c << "'>&nbsp;K=" << k << "&nbsp;</span> ";
  f << "</p>\n<div class='cols'>\n";
  for (const MethodResult* m : ms) {
    double sum = 0;
    for (size_t j = 0; j + 1 < shown && j < m->passage_loss.size(); ++j) sum += m->passage_loss[j];
    std::string name;
    for (char c : m->name) name += html_escape(c);
    f << "<div><h2><code>" << name << "</code> (" << methods::kind_name(m->kind) << ")</h2><p>"
      << (m->passage_loss.empty() || shown < 2 ? std::string("no per-token losses recorded")
                                               : fmt("%.4f", sum / double(shown - 1) / std::log(2.0)) + " bits/byte here")
      << "</p><pre>";
    passage_html(f, r, *m, shown);
    f << "</pre></div>\n";
  }
  f << "</div>\n";
}

}  // namespace ponder::cli
