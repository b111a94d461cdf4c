#include "launcher/control.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parse.h"
#include "launcher/agreement.h"

namespace dl {
namespace {

struct Verb {
  MsgKind kind;
  const char* name;
  int fields;  // fixed fields after the verb
  bool text;   // a free-text field follows
};

constexpr Verb kVerbs[] = {
    {MsgKind::hello, "HELLO", 2, true},    {MsgKind::want, "WANT", 1, true},
    {MsgKind::step, "STEP", 3, false},     {MsgKind::done, "DONE", 2, false},
    {MsgKind::exit, "EXIT", 1, true},      {MsgKind::prepare, "PREPARE", 1, false},
    {MsgKind::target, "TARGET", 3, false}, {MsgKind::stop_after, "STOPAFTER", 1, false},
    {MsgKind::end, "END", 1, true},        {MsgKind::progress, "PROGRESS", 3, false},
    {MsgKind::dump, "DUMP", 0, true},      {MsgKind::trace, "TRACE", 0, true},
    {MsgKind::traced, "TRACED", 1, true},  {MsgKind::gpu, "GPU", 0, true},
};

const Verb& verb_of(MsgKind kind) {
  for (const auto& v : kVerbs) {
    if (v.kind == kind) return v;
  }
  return kVerbs[0];
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

std::string format_message(const Message& m) {
  const Verb& v = verb_of(m.kind);
  std::string out = v.name;
  switch (m.kind) {
    case MsgKind::hello: out += fmt::format(" {} {}", m.rank, m.key); break;
    case MsgKind::want: out += fmt::format(" {}", m.flag ? 1 : 0); break;
    case MsgKind::step: out += fmt::format(" {} {} {}", m.seq, m.flag ? 1 : 0, m.step); break;
    case MsgKind::done: out += fmt::format(" {} {}", m.seq, m.step); break;
    case MsgKind::exit:
    case MsgKind::end: out += fmt::format(" {}", m.code); break;
    case MsgKind::prepare:
    case MsgKind::stop_after: out += fmt::format(" {}", m.seq); break;
    case MsgKind::target: out += fmt::format(" {} {} {}", m.seq, m.step, m.flag ? 1 : 0); break;
    case MsgKind::progress: out += fmt::format(" {} {} {}", m.step, m.seq, m.flag ? 1 : 0); break;
    case MsgKind::traced: out += fmt::format(" {}", m.flag ? 1 : 0); break;
    case MsgKind::dump:
    case MsgKind::trace:
    case MsgKind::gpu: break;
  }
  if (v.text) out += " " + one_line(m.text);
  out += '\n';
  return out;
}

Message parse_message(std::string_view line) {
  const auto fail = [&](std::string_view why) {
    return SystemError(fmt::format("bad control message '{}': {}", line, why));
  };
  std::vector<std::string_view> words;
  std::size_t pos = 0;
  while (pos < line.size()) {
    const std::size_t space = std::min(line.find(' ', pos), line.size());
    words.push_back(line.substr(pos, space - pos));
    pos = space + 1;
  }
  if (words.empty()) throw fail("empty");
  const Verb* verb = nullptr;
  for (const auto& v : kVerbs) {
    if (words[0] == v.name) verb = &v;
  }
  if (!verb) throw fail("unknown verb");
  if (static_cast<int>(words.size()) < 1 + verb->fields ||
      (!verb->text && static_cast<int>(words.size()) != 1 + verb->fields)) {
    throw fail("wrong number of fields");
  }
  const auto number = [&](int i, std::uint64_t max) {
    try {
      return parse_uint("field", words[i], 0, max);
    } catch (const InputError&) {
      throw fail(fmt::format("field {} is not a number", i));
    }
  };
  const auto step = [&](int i) -> std::int64_t {
    if (words[i] == "-1") return -1;
    return static_cast<std::int64_t>(number(i, INT64_MAX));
  };
  const auto flag = [&](int i) {
    if (words[i] != "0" && words[i] != "1") throw fail(fmt::format("field {} is not 0 or 1", i));
    return words[i] == "1";
  };
  Message m;
  m.kind = verb->kind;
  switch (m.kind) {
    case MsgKind::hello:
      m.rank = static_cast<std::uint32_t>(number(1, UINT32_MAX));
      if (words[2].empty() || words[2].size() > 2 * kSecretBytes ||
          words[2].find_first_not_of("0123456789abcdef") != std::string_view::npos) {
        throw fail("field 2 is not a key");
      }
      m.key = std::string(words[2]);
      break;
    case MsgKind::want: m.flag = flag(1); break;
    case MsgKind::step:
      m.seq = number(1, UINT64_MAX);
      m.flag = flag(2);
      // A rank's step may also say that its program has no client API.
      m.step = words[3] == "-2" ? kNoClientApi : step(3);
      break;
    case MsgKind::done:
      m.seq = number(1, UINT64_MAX);
      m.step = step(2);
      break;
    case MsgKind::exit:
    case MsgKind::end: m.code = static_cast<int>(number(1, 255)); break;
    case MsgKind::prepare:
    case MsgKind::stop_after: m.seq = number(1, UINT64_MAX); break;
    case MsgKind::target:
      m.seq = number(1, UINT64_MAX);
      m.step = step(2);
      m.flag = flag(3);
      break;
    case MsgKind::progress:
      m.step = step(1);
      m.seq = number(2, UINT64_MAX);
      m.flag = flag(3);
      break;
    case MsgKind::traced: m.flag = flag(1); break;
    case MsgKind::dump:
    case MsgKind::trace:
    case MsgKind::gpu: break;
  }
  if (verb->text) {
    std::size_t skip = 0;
    for (int i = 0; i <= verb->fields; ++i) skip += words[i].size() + 1;
    m.text = skip < line.size() ? std::string(line.substr(skip)) : std::string();
  }
  return m;
}

std::string new_step_secret() {
  unsigned char bytes[kSecretBytes];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(
          fmt::format("couldn't draw the step's secret: getrandom: {}", std::strerror(errno)));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char b : bytes) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  }
  return diff == 0;
}

HelloCheck check_hello(std::string_view line, std::string_view secret, std::uint32_t world_size) {
  HelloCheck c;
  Message m;
  try {
    m = parse_message(line);
  } catch (const SystemError&) {
    c.why = "not a control message";
    return c;
  }
  if (m.kind != MsgKind::hello) {
    c.why = "did not start with HELLO";
  } else if (secret.empty() || !same_secret(m.key, secret)) {
    c.why = "wrong key";
  } else if (m.rank == 0 || m.rank >= world_size) {
    c.why = fmt::format("no rank {} in a step of {}", m.rank, world_size);
  } else {
    c.hello = std::move(m);
  }
  return c;
}

void LineBuffer::append(std::string_view data) {
  data_.append(data);
  if (data_.size() > kMaxLine && data_.find('\n') == std::string::npos) {
    throw SystemError(fmt::format("control message longer than {} bytes", kMaxLine));
  }
}

std::optional<std::string> LineBuffer::next_line() {
  const std::size_t nl = data_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = data_.substr(0, nl);
  data_.erase(0, nl + 1);
  return line;
}

}  // namespace dl
