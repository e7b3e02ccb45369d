// tests/tidy_test.cc
//
// The determinism lint. DESIGN.md's determinism rules say logic code never
// reads a real clock, draws real randomness, starts threads, sleeps, makes raw
// system calls, reads the environment, or lets the iteration order of a hash
// container escape. This test scans the logic folders (core net storage raft
// coordinators sim io; not io/uring or io/posix, which are the real machine,
// nor *_test.cc / *_bench.cc files, tests/ or tools/) and fails naming
// file:line and the rule for every use it finds.
//
// How it matches: comments, string and character literals are blanked first
// (keeping line breaks), so documentation naming a banned call does not trip
// it; the rest is split into tokens and each rule looks at a few neighbouring
// tokens (so `ctx.random()` or `clock.sleep_for()` are not mistaken for
// `rand()` or `sleep()`). Hash-container iteration is found per file: names
// declared in the file (or in its companion header) with a hash container
// type, or an alias of one, that a range-for (or a classic for over begin())
// walks. A loop whose order does not matter says so with the comment
// `// order-independent` on its line.
//
// The checker is also run over small snippets, one per banned pattern, so the
// test is seen to fail.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#ifndef BROOK_SOURCE_DIR
#error "BROOK_SOURCE_DIR must name the project's source directory"
#endif

namespace brook::tidy {
namespace {

struct Violation {
  std::string file;
  int line = 0;
  std::string rule;
};

// ---------------------------------------------------------------------------
// Blanking comments and literals.

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// Length of the raw-string prefix (R, u8R, uR, UR, LR) that ends right
// before the quote at `quote`, or 0 when the quote opens an ordinary string.
size_t raw_prefix_length(std::string_view src, size_t quote) {
  size_t begin = quote;
  while (begin > 0 && is_word_char(src[begin - 1])) --begin;
  const std::string_view word = src.substr(begin, quote - begin);
  for (std::string_view prefix : {"R", "u8R", "uR", "UR", "LR"}) {
    if (word == prefix) return word.size();
  }
  return 0;
}

// Copies `src[from, to)` into `out` as spaces, keeping line breaks.
void blank(std::string_view src, size_t from, size_t to, std::string& out) {
  for (size_t i = from; i < to && i < src.size(); ++i) out += src[i] == '\n' ? '\n' : ' ';
}

// End (one past) of the quoted literal starting at `open` (a ' or ").
size_t end_of_quoted(std::string_view src, size_t open) {
  const char quote = src[open];
  size_t i = open + 1;
  while (i < src.size() && src[i] != quote && src[i] != '\n') i += src[i] == '\\' ? 2 : 1;
  return std::min(i + 1, src.size());
}

// End (one past) of the raw string whose quote is at `open`.
size_t end_of_raw(std::string_view src, size_t open) {
  const size_t paren = src.find('(', open);
  if (paren == std::string_view::npos) return src.size();
  const std::string closing =
      ")" + std::string(src.substr(open + 1, paren - open - 1)) + "\"";
  const size_t end = src.find(closing, paren);
  return end == std::string_view::npos ? src.size() : end + closing.size();
}

// A ' inside a number is a digit separator (1'000'000), not a literal.
bool is_digit_separator(std::string_view src, size_t i) {
  size_t begin = i;
  while (begin > 0 && (is_word_char(src[begin - 1]) || src[begin - 1] == '\'')) --begin;
  return begin < i && std::isdigit(static_cast<unsigned char>(src[begin])) != 0;
}

// The source with comments and the contents of string and character
// literals replaced by spaces; line breaks are kept, so lines still match.
std::string strip_comments_and_literals(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  size_t i = 0;
  while (i < src.size()) {
    size_t end = i;
    if (src.substr(i, 2) == "//") {
      end = src.find('\n', i);
      if (end == std::string_view::npos) end = src.size();
    } else if (src.substr(i, 2) == "/*") {
      end = src.find("*/", i + 2);
      end = end == std::string_view::npos ? src.size() : end + 2;
    } else if (src[i] == '"') {
      end = raw_prefix_length(src, i) > 0 ? end_of_raw(src, i) : end_of_quoted(src, i);
    } else if (src[i] == '\'' && !is_digit_separator(src, i)) {
      end = end_of_quoted(src, i);
    }
    if (end == i) {
      out += src[i++];
      continue;
    }
    blank(src, i, end, out);
    i = end;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Tokens.

struct Token {
  std::string text;
  int line = 0;
  bool ident = false;
};

std::vector<Token> tokenize(std::string_view code) {
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (c == '\n') ++line;
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (is_word_char(c)) {
      while (end < code.size() && (is_word_char(code[end]) || code[end] == '\'')) ++end;
    } else if (code.substr(i, 2) == "::" || code.substr(i, 2) == "->") {
      end = i + 2;
    }
    const std::string text(code.substr(i, end - i));
    const bool ident = is_word_char(c) && std::isdigit(static_cast<unsigned char>(c)) == 0;
    tokens.push_back(Token{text, line, ident});
    i = end;
  }
  return tokens;
}

class TokenView {
 public:
  explicit TokenView(const std::vector<Token>& tokens) : tokens_(tokens) {}
  const std::string& at(size_t i, ptrdiff_t delta) const {
    static const std::string kNone;
    const ptrdiff_t j = static_cast<ptrdiff_t>(i) + delta;
    if (j < 0 || j >= static_cast<ptrdiff_t>(tokens_.size())) return kNone;
    return tokens_[static_cast<size_t>(j)].text;
  }
  bool ident(size_t i, ptrdiff_t delta) const {
    const ptrdiff_t j = static_cast<ptrdiff_t>(i) + delta;
    return j >= 0 && j < static_cast<ptrdiff_t>(tokens_.size()) &&
           tokens_[static_cast<size_t>(j)].ident;
  }
  // `name` qualified by `ns::` (e.g. std::thread).
  bool qualified_by(size_t i, std::string_view ns) const {
    return at(i, -1) == "::" && at(i, -2) == ns;
  }
  // A call of a free function: not a member (`.x(` / `->x(`), not a name
  // qualified by a class or namespace other than std, and not a declaration
  // (a type name right before it).
  bool free_call(size_t i) const {
    if (at(i, 1) != "(") return false;
    const std::string& before = at(i, -1);
    if (before == "." || before == "->") return false;
    if (before == "::") return at(i, -2) == "std" || !ident(i, -2);
    static const std::set<std::string> kKeywords = {
        "return", "co_return", "co_await", "co_yield", "else", "do",  "case",
        "throw",  "new",       "delete",   "not",      "and",  "or",  "sizeof"};
    return !ident(i, -1) || kKeywords.contains(before);
  }

 private:
  const std::vector<Token>& tokens_;
};

// ---------------------------------------------------------------------------
// Rules on single calls and names. Each returns the rule's text, or "".

std::string real_time_rule(const TokenView& t, size_t i) {
  static const std::set<std::string> kClocks = {
      "system_clock", "steady_clock", "high_resolution_clock", "utc_clock",
      "tai_clock",    "gps_clock",    "file_clock"};
  const std::string& name = t.at(i, 0);
  if (kClocks.contains(name) && t.at(i, 1) == "::" && t.at(i, 2) == "now") {
    return "real clock read: " + name + "::now (use the node's io::Clock)";
  }
  static const std::set<std::string> kAbslTime = {"Now", "GetCurrentTimeNanos", "SleepFor"};
  if (kAbslTime.contains(name) && t.qualified_by(i, "absl")) {
    return "real time: absl::" + name + " (use the node's io::Clock)";
  }
  static const std::set<std::string> kTimeCalls = {"clock_gettime", "gettimeofday"};
  if (kTimeCalls.contains(name)) return "real clock read: " + name;
  const bool time_arg =
      t.at(i, 2) == "nullptr" || t.at(i, 2) == "NULL" || t.at(i, 2) == "0";
  if (name == "time" && t.free_call(i) && time_arg && t.at(i, 3) == ")") {
    return "real clock read: time(" + t.at(i, 2) + ")";
  }
  return "";
}

std::string randomness_rule(const TokenView& t, size_t i) {
  const std::string& name = t.at(i, 0);
  if (name == "random_device") return "real randomness: std::random_device (use io::Random)";
  if (name == "BitGen" || name == "InsecureBitGen") {
    return "real randomness: absl::" + name + " (use io::Random)";
  }
  static const std::set<std::string> kRand = {"rand",    "srand",   "rand_r",  "drand48",
                                              "lrand48", "mrand48", "erand48", "nrand48",
                                              "jrand48", "srand48", "random_shuffle",
                                              "getrandom", "getentropy", "arc4random"};
  if (kRand.contains(name) && t.free_call(i)) {
    return "randomness outside io::Random: " + name + "()";
  }
  return "";
}

std::string thread_rule(const TokenView& t, size_t i) {
  static const std::set<std::string> kStd = {"thread", "jthread", "this_thread", "async"};
  const std::string& name = t.at(i, 0);
  if (kStd.contains(name) && t.qualified_by(i, "std")) {
    return "threads: std::" + name + " (one node is one event loop)";
  }
  if (name.starts_with("pthread_")) return "threads: " + name;
  static const std::set<std::string> kSleeps = {"sleep", "usleep", "nanosleep",
                                                "clock_nanosleep"};
  if (kSleeps.contains(name) && t.free_call(i)) {
    return "real sleep: " + name + "() (use co_await clock.sleep_for)";
  }
  return "";
}

std::string system_rule(const TokenView& t, size_t i) {
  static const std::set<std::string> kSyscalls = {
      "read",    "write",    "open",     "openat",  "close",    "pread",   "pwrite",
      "preadv",  "pwritev",  "readv",    "writev",  "fsync",    "fdatasync", "ftruncate",
      "lseek",   "unlink",   "unlinkat", "rename",  "renameat", "mkdir",   "rmdir",
      "socket",  "connect",  "accept",   "accept4", "bind",     "listen",  "send",
      "recv",    "sendto",   "recvfrom", "sendmsg", "recvmsg",  "mmap",    "munmap",
      "ioctl",   "fcntl",    "poll",     "select",  "fork",     "kill",    "stat",
      "fstat",   "opendir",  "readdir",  "getpid"};
  const std::string& name = t.at(i, 0);
  if (name == "syscall" && t.free_call(i)) return "raw system call: syscall()";
  if (kSyscalls.contains(name) && t.at(i, -1) == "::" && !t.ident(i, -2) && t.at(i, 1) == "(") {
    return "raw system call: ::" + name + "() (only io/uring and io/posix reach the OS)";
  }
  if (name.starts_with("epoll_") || name.starts_with("io_uring_")) {
    return "raw system call: " + name + " (only io/uring and io/posix)";
  }
  static const std::set<std::string> kEnv = {"getenv", "secure_getenv", "setenv", "putenv",
                                             "unsetenv"};
  if (kEnv.contains(name)) return "environment access: " + name + " (pass configuration in)";
  static const std::set<std::string> kFiles = {"fopen", "freopen", "ifstream", "ofstream",
                                               "fstream", "filesystem"};
  if (kFiles.contains(name) && (t.free_call(i) || t.qualified_by(i, "std"))) {
    return "real file access: " + name + " (use io::Disk)";
  }
  return "";
}

// ---------------------------------------------------------------------------
// Iteration over hash containers.

const std::set<std::string>& hash_types() {
  static const std::set<std::string> kTypes = {
      "flat_hash_map", "flat_hash_set",      "node_hash_map",     "node_hash_set",
      "unordered_map", "unordered_set",      "unordered_multimap", "unordered_multiset"};
  return kTypes;
}

// Index just past the template argument list opening at `open` (a '<').
size_t skip_template_args(const std::vector<Token>& tokens, size_t open) {
  int depth = 0;
  for (size_t i = open; i < tokens.size(); ++i) {
    if (tokens[i].text == "<") ++depth;
    if (tokens[i].text == ">" && --depth == 0) return i + 1;
    if (tokens[i].text == ";" || tokens[i].text == "{") return i;  // not a template
  }
  return tokens.size();
}

// Aliases of hash containers: `using X = ...hash...;` and `typedef ... X;`.
std::set<std::string> hash_aliases(const std::vector<Token>& tokens) {
  std::set<std::string> aliases;
  for (size_t i = 0; i + 2 < tokens.size(); ++i) {
    const bool is_using = tokens[i].text == "using" && tokens[i + 2].text == "=";
    if (!is_using && tokens[i].text != "typedef") continue;
    bool hashed = false;
    size_t end = i;
    while (end < tokens.size() && tokens[end].text != ";") {
      hashed |= hash_types().contains(tokens[end].text) || aliases.contains(tokens[end].text);
      ++end;
    }
    if (!hashed) continue;
    aliases.insert(is_using ? tokens[i + 1].text : tokens[end - 1].text);
  }
  return aliases;
}

// Names declared with a hash container type: variables, members, parameters
// and functions returning one (stored as "name()").
std::set<std::string> hash_container_names(std::string_view source) {
  const std::vector<Token> tokens = tokenize(strip_comments_and_literals(source));
  std::set<std::string> types = hash_types();
  const std::set<std::string> aliases = hash_aliases(tokens);
  types.insert(aliases.begin(), aliases.end());
  std::set<std::string> names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!types.contains(tokens[i].text)) continue;
    size_t j = i + 1;
    if (j < tokens.size() && tokens[j].text == "<") j = skip_template_args(tokens, j);
    while (j < tokens.size() && (tokens[j].text == "const" || tokens[j].text == "&" ||
                                 tokens[j].text == "*")) {
      ++j;
    }
    if (j + 1 >= tokens.size() || !tokens[j].ident || aliases.contains(tokens[j].text)) continue;
    names.insert(tokens[j + 1].text == "(" ? tokens[j].text + "()" : tokens[j].text);
  }
  return names;
}

// Whether the range expression tokens [begin, end) name a hash container
// directly: a chain like `a.b->c`, `*p`, `this->m_` ending in a hash
// variable, or a call `x.f()` of a function returning one. Expressions that
// pass the container to a function (sorted(m)) are not iteration over it.
bool names_hash_container(const std::vector<Token>& tokens, size_t begin, size_t end,
                          const std::set<std::string>& names) {
  if (end >= begin + 3 && tokens[end - 2].text == "(" && tokens[end - 1].text == ")") {
    return names.contains(tokens[end - 3].text + "()");
  }
  for (size_t i = begin; i < end; ++i) {
    const std::string& s = tokens[i].text;
    if (!tokens[i].ident && s != "." && s != "->" && s != "::" && s != "*") return false;
  }
  return end > begin && names.contains(tokens[end - 1].text);
}

// Index of the ')' closing the '(' at `open`.
size_t matching_paren(const std::vector<Token>& tokens, size_t open) {
  int depth = 0;
  for (size_t i = open; i < tokens.size(); ++i) {
    if (tokens[i].text == "(") ++depth;
    if (tokens[i].text == ")" && --depth == 0) return i;
  }
  return tokens.size();
}

// Whether the for-header (open, close) iterates a hash container.
bool iterates_hash_container(const std::vector<Token>& tokens, size_t open, size_t close,
                             const std::set<std::string>& names) {
  int depth = 0;
  for (size_t i = open + 1; i < close; ++i) {
    const std::string& s = tokens[i].text;
    if (s == "(" || s == "[" || s == "{") ++depth;
    if (s == ")" || s == "]" || s == "}") --depth;
    if (depth == 0 && s == ":") return names_hash_container(tokens, i + 1, close, names);
    if (depth == 0 && s == ";") break;  // a classic for
  }
  for (size_t i = open + 1; i + 2 < close; ++i) {  // `it = m.begin()`
    const std::string& next = tokens[i + 2].text;
    const bool member = tokens[i + 1].text == "." || tokens[i + 1].text == "->";
    if (member && (next == "begin" || next == "cbegin") && names.contains(tokens[i].text)) {
      return true;
    }
  }
  return false;
}

bool waived(const std::vector<std::string>& lines, int first, int last) {
  for (int line = first; line <= last && line <= static_cast<int>(lines.size()); ++line) {
    if (lines[static_cast<size_t>(line - 1)].find("// order-independent") != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> split_lines(std::string_view source) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(source)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// ---------------------------------------------------------------------------
// The checker.

// Every violation in one file. `companion_names` are hash containers declared
// in the file's header (members iterated in the .cc).
std::vector<Violation> check_source(const std::string& file, std::string_view source,
                                    const std::set<std::string>& companion_names = {}) {
  const std::vector<Token> tokens = tokenize(strip_comments_and_literals(source));
  const TokenView view(tokens);
  std::vector<Violation> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].ident) continue;
    for (auto rule : {real_time_rule, randomness_rule, thread_rule, system_rule}) {
      std::string text = rule(view, i);
      if (!text.empty()) out.push_back(Violation{file, tokens[i].line, std::move(text)});
    }
  }
  std::set<std::string> names = hash_container_names(source);
  names.insert(companion_names.begin(), companion_names.end());
  const std::vector<std::string> lines = split_lines(source);
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (tokens[i].text != "for" || tokens[i + 1].text != "(") continue;
    const size_t close = matching_paren(tokens, i + 1);
    if (close >= tokens.size() || !iterates_hash_container(tokens, i + 1, close, names)) continue;
    if (waived(lines, tokens[i].line, tokens[close].line)) continue;
    out.push_back(Violation{file, tokens[i].line,
                            "iteration over a hash container: its order is not deterministic "
                            "(use an ordered container or sort, or mark the loop "
                            "// order-independent)"});
  }
  std::sort(out.begin(), out.end(),
            [](const Violation& a, const Violation& b) { return a.line < b.line; });
  return out;
}

// ---------------------------------------------------------------------------
// The tree.

// Whether `relative` (a path under the source root, '/'-separated) is logic
// code the rules apply to.
bool is_logic_file(const std::string& relative) {
  static const std::vector<std::string> kFolders = {"core/", "net/",          "storage/",
                                                    "raft/", "coordinators/", "sim/",
                                                    "io/"};
  static const std::vector<std::string> kExcluded = {"io/uring/", "io/posix/", "io/real/"};
  const bool in_logic = std::any_of(kFolders.begin(), kFolders.end(),
                                    [&](const std::string& f) { return relative.starts_with(f); });
  const bool excluded = std::any_of(kExcluded.begin(), kExcluded.end(), [&](const std::string& f) {
    return relative.starts_with(f);
  });
  if (!in_logic || excluded) return false;
  for (std::string_view suffix : {"_test.cc", "_bench.cc"}) {
    if (relative.ends_with(suffix)) return false;
  }
  for (std::string_view ext : {".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".inc", ".ipp"}) {
    if (relative.ends_with(ext)) return true;
  }
  return false;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The logic files under `root`, sorted (directory order is not portable).
std::vector<std::string> logic_files(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.starts_with(".") || name.starts_with("build"))) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    const std::string relative = fs::relative(it->path(), root).generic_string();
    if (is_logic_file(relative)) files.push_back(relative);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Violation> check_tree(const std::filesystem::path& root, size_t* scanned) {
  std::vector<Violation> out;
  const std::vector<std::string> files = logic_files(root);
  *scanned = files.size();
  for (const std::string& relative : files) {
    std::set<std::string> companion;
    if (relative.ends_with(".cc")) {
      const auto header = root / (relative.substr(0, relative.size() - 3) + ".h");
      if (std::filesystem::exists(header)) companion = hash_container_names(read_file(header));
    }
    for (Violation& v : check_source(relative, read_file(root / relative), companion)) {
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::string describe(const std::vector<Violation>& violations) {
  std::string text;
  for (const Violation& v : violations) {
    text += v.file + ":" + std::to_string(v.line) + ": " + v.rule + "\n";
  }
  return text;
}

// ---------------------------------------------------------------------------
// Tests.

// The logic folders of this tree break none of the determinism rules.
TEST(Tidy, LogicFoldersFollowTheDeterminismRules) {
  const std::filesystem::path root = BROOK_SOURCE_DIR;
  ASSERT_TRUE(std::filesystem::exists(root / "io" / "task.h")) << "bad BROOK_SOURCE_DIR: " << root;
  size_t scanned = 0;
  const std::vector<Violation> violations = check_tree(root, &scanned);
  EXPECT_GT(scanned, 10u) << "the scan found almost no files: is the root right?";
  for (const Violation& v : violations) {
    ADD_FAILURE_AT(v.file.c_str(), v.line) << v.file << ":" << v.line << ": " << v.rule;
  }
  std::cout << "tidy: scanned " << scanned << " files, " << violations.size()
            << " violations\n";
}

struct Case {
  const char* code;
  int line;           // line the violation is reported on
  const char* rule;   // a fragment of the rule's text
};

// Each banned pattern in a snippet is reported with its line and rule.
TEST(Tidy, CatchesEachBannedPattern) {
  const Case cases[] = {
      {"auto t = std::chrono::steady_clock::now();", 1, "real clock read: steady_clock::now"},
      {"x;\nauto t = std::chrono::system_clock::now();", 2, "system_clock::now"},
      {"using namespace std::chrono;\nauto t = high_resolution_clock::now();", 2,
       "high_resolution_clock::now"},
      {"absl::Time t = absl::Now();", 1, "absl::Now"},
      {"std::random_device rd;", 1, "std::random_device"},
      {"int x = rand() % 6;", 1, "randomness outside io::Random: rand()"},
      {"srand(42);", 1, "srand()"},
      {"int y = std::rand();", 1, "rand()"},
      {"int z = ::rand();", 1, "rand()"},
      {"absl::BitGen gen;", 1, "absl::BitGen"},
      {"std::thread t([] {});", 1, "std::thread"},
      {"std::jthread t([] {});", 1, "std::jthread"},
      {"pthread_create(&t, nullptr, f, nullptr);", 1, "pthread_create"},
      {"std::this_thread::sleep_for(d);", 1, "std::this_thread"},
      {"sleep(1);", 1, "real sleep: sleep()"},
      {"usleep(10);", 1, "usleep()"},
      {"nanosleep(&ts, nullptr);", 1, "nanosleep()"},
      {"long r = syscall(SYS_gettid);", 1, "syscall()"},
      {"ssize_t n = ::read(fd, buf, 4);", 1, "::read()"},
      {"::write(fd, buf, 4);", 1, "::write()"},
      {"int fd = ::open(path, O_RDONLY);", 1, "::open()"},
      {"int ep = epoll_create1(0);", 1, "epoll_create1"},
      {"io_uring_submit(&ring);", 1, "io_uring_submit"},
      {"clock_gettime(CLOCK_MONOTONIC, &ts);", 1, "clock_gettime"},
      {"gettimeofday(&tv, nullptr);", 1, "gettimeofday"},
      {"auto now = time(nullptr);", 1, "time(nullptr)"},
      {"auto now = std::time(NULL);", 1, "time(NULL)"},
      {"const char* home = getenv(\"HOME\");", 1, "getenv"},
      {"const char* home = std::getenv(\"HOME\");", 1, "getenv"},
      {"#define NOW std::chrono::steady_clock::now()", 1, "steady_clock::now"},
      {"::getrandom(&seed, sizeof(seed), 0);", 1, "getrandom()"},
      {"pid_t p = ::getpid();", 1, "::getpid()"},
      {"FILE* f = fopen(path, \"r\");", 1, "real file access: fopen"},
      {"std::ifstream in(path);", 1, "real file access: ifstream"},
      {"std::filesystem::remove(path);", 1, "real file access: filesystem"},
  };
  for (const Case& c : cases) {
    const std::vector<Violation> found = check_source("snippet.cc", c.code);
    ASSERT_EQ(found.size(), 1u) << c.code << "\n" << describe(found);
    EXPECT_EQ(found[0].line, c.line) << c.code;
    EXPECT_NE(found[0].rule.find(c.rule), std::string::npos)
        << c.code << " gave: " << found[0].rule;
  }
}

// Comments, strings and look-alike names (members, qualified names, the
// project's own Clock and Random) are not violations.
TEST(Tidy, PassesCleanCode) {
  const char* clean = R"src(
// Never call std::chrono::steady_clock::now() or rand() here; see DESIGN.md.
/* absl::Now(), std::thread, sleep(1), ::read(fd) and getenv("X") are banned. */
const char* doc = "std::random_device and time(nullptr) are banned";
const char* raw = R"x(std::this_thread::sleep_for(1s);
  epoll_wait(...); usleep(3);)x";
char quote = '"';
int big = 1'000'000;
auto t = ctx.clock().now();
co_await clock.sleep_for(5ms);
uint64_t r = ctx.random().next_u64();
uint64_t s = random_.uniform(6);
auto b = buffer.read(4);
file->write_at(0, data);
int n = reader.rand_step();
void write_trace(std::FILE* out);
std::fprintf(out, "%d\n", 3);
Random& random() const;
std::map<std::string, int> ordered;
for (const auto& [k, v] : ordered) use(k, v);
io::Disk::open(path);
auto d = std::chrono::nanoseconds(5);
uint64_t time_ms = time_of(record);
)src";
  const std::vector<Violation> found = check_source("clean.cc", clean);
  EXPECT_TRUE(found.empty()) << describe(found);
}

// Iterating a hash container declared in the same file (or its header) is
// reported, however it is spelled; lookups, ordered containers, sorted copies
// and loops marked order-independent are not.
TEST(Tidy, HashContainerIteration) {
  const Case flagged[] = {
      {"absl::flat_hash_map<std::string, int> counts_;\nvoid f() {\n"
       "  for (const auto& [k, v] : counts_) emit(k);\n}",
       3, "iteration over a hash container"},
      {"void f(const std::unordered_set<int>& ids) {\n  for (int id : ids) send(id);\n}", 2,
       "hash container"},
      {"using Members = absl::node_hash_map<int, Member>;\nMembers members_;\n"
       "void f() {\n  for (auto& m : this->members_) g(m);\n}",
       4, "hash container"},
      {"struct S { absl::flat_hash_set<int> live; };\nvoid f(S* s) {\n"
       "  for (int x : s->live) g(x);\n}",
       3, "hash container"},
      {"const absl::flat_hash_map<int, int>& table() const;\nvoid f() {\n"
       "  for (auto& e : state.table()) g(e);\n}",
       3, "hash container"},
      {"std::unordered_map<int, int> m;\nvoid f() {\n"
       "  for (auto it = m.begin(); it != m.end(); ++it) g(*it);\n}",
       3, "hash container"},
  };
  for (const Case& c : flagged) {
    const std::vector<Violation> found = check_source("snippet.cc", c.code);
    ASSERT_EQ(found.size(), 1u) << c.code << "\n" << describe(found);
    EXPECT_EQ(found[0].line, c.line) << c.code;
    EXPECT_NE(found[0].rule.find(c.rule), std::string::npos) << c.code;
  }
  const char* clean = R"src(
absl::flat_hash_map<std::string, int> index_;
std::map<std::string, int> ordered_;
int lookup(const std::string& k) { return index_.at(k); }
void f() {
  for (const auto& [k, v] : ordered_) emit(k);
  for (const auto& k : sorted_keys(index_)) emit(k);
  for (const auto& [k, v] : index_) total += v;  // order-independent
  for (int i = 0; i < 3; ++i) emit(i);
}
)src";
  const std::vector<Violation> found = check_source("clean.cc", clean);
  EXPECT_TRUE(found.empty()) << describe(found);
  // A member declared in the companion header, iterated in the .cc.
  const std::set<std::string> header = hash_container_names(
      "class G {\n absl::flat_hash_map<int, Member> members_;\n};");
  EXPECT_EQ(check_source("g.cc", "void G::f() {\n for (auto& m : members_) g(m);\n}", header)
                .size(),
            1u);
}

// Blanking keeps line numbers and handles raw strings, escapes and digit
// separators.
TEST(Tidy, StripKeepsLinesAndCode) {
  const std::string src =
      "a = \"x\\\"y\"; // c\n/* b\nc */ d = R\"z(1\n2)z\"; e = '\\''; f = 1'000;\ng();";
  const std::string out = strip_comments_and_literals(src);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), std::count(src.begin(), src.end(), '\n'));
  EXPECT_EQ(out.find("x"), std::string::npos);
  EXPECT_EQ(out.find("c */"), std::string::npos);
  EXPECT_NE(out.find("d = "), std::string::npos);
  EXPECT_NE(out.find("f = 1'000;"), std::string::npos);
  EXPECT_NE(out.find("g();"), std::string::npos);
  const std::vector<Violation> found = check_source("s.cc", src + "\nsleep(1);");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 6);
}

// The scan covers the logic folders and nothing else.
TEST(Tidy, ScopeOfTheScan) {
  for (const char* in : {"io/task.h", "io/scope.cc", "core/broker.cc", "net/codec/crc.h",
                         "storage/log.cc", "raft/raft.cc", "coordinators/group.cc",
                         "sim/disk.cc"}) {
    EXPECT_TRUE(is_logic_file(in)) << in;
  }
  for (const char* out : {"io/uring/loop.cc", "io/posix/loop.cc", "io/real/real_node.cc",
                          "sim/disk_test.cc",
                          "storage/log_bench.cc", "tests/tidy_test.cc", "tools/brook.cc",
                          "fuzz/decode_fuzz.cc", "io/README.md", "io/CMakeLists.txt"}) {
    EXPECT_FALSE(is_logic_file(out)) << out;
  }
}

}  // namespace
}  // namespace brook::tidy
