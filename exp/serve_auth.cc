#include "exp/serve_auth.h"

#include <algorithm>
#include <cctype>

#include "core/sysio.h"

namespace dl::exp {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string new_token() {
  return sys::random_hex() + sys::random_hex() + sys::random_hex() + sys::random_hex();
}

std::string token_cookie_name(int port) { return "dl-exp-token-" + std::to_string(port); }

std::string cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const auto semi = header.find(';');
    const std::string_view pair = trim(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    const auto eq = pair.find('=');
    if (eq != std::string_view::npos && trim(pair.substr(0, eq)) == name) {
      return std::string(trim(pair.substr(eq + 1)));
    }
  }
  return "";
}

std::string authorization_token(std::string_view header) {
  header = trim(header);
  const auto space = header.find(' ');
  if (space == std::string_view::npos) return "";
  const std::string scheme = lower(header.substr(0, space));
  if (scheme != "token" && scheme != "bearer") return "";
  return std::string(trim(header.substr(space + 1)));
}

bool same_token(std::string_view given, std::string_view token) {
  if (given.empty() || token.empty()) return false;
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < token.size(); ++i) {
    diff |= static_cast<unsigned char>(token[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

std::string host_of(std::string_view host_header) {
  std::string_view h = trim(host_header);
  if (h.empty()) return "";
  if (h.front() == '[') {  // [v6]:port
    const auto close = h.find(']');
    if (close == std::string_view::npos) return "";
    const std::string_view rest = h.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "";
    return lower(h.substr(1, close - 1));
  }
  const auto colon = h.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view port = h.substr(colon + 1);
    if (port.empty() || !std::all_of(port.begin(), port.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        })) {
      return "";
    }
    h = h.substr(0, colon);
  }
  std::string name = lower(h);
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is localhost
  return name;
}

std::vector<std::string> served_host_names(const std::string& bind, const std::string& hostname) {
  std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  const std::string b =
      host_of(bind.find(':') != std::string::npos && bind[0] != '[' ? "[" + bind + "]" : bind);
  if (!b.empty() && b != "0.0.0.0" && b != "::") names.push_back(b);
  const std::string full = lower(hostname);
  if (!full.empty()) {
    names.push_back(full);
    if (const auto dot = full.find('.'); dot != std::string::npos && dot > 0) {
      names.push_back(full.substr(0, dot));
    }
  }
  return names;
}

bool host_allowed(std::string_view host_header, const std::vector<std::string>& names) {
  const std::string name = host_of(host_header);
  if (name.empty()) return false;
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace dl::exp
