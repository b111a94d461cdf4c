// Who `dl-exp serve` answers, the pure part: a request must name this host (a page of
// another site whose name resolves to 127.0.0.1, DNS rebinding, sends its own name) and
// carry the token the server printed at its start (any user of the host can reach a
// loopback port), in the URL (?token=), a cookie set from that URL, or an
// `Authorization: token ...` header, as Jupyter does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dl::exp {

// 64 hex digits from getrandom(2).
std::string new_token();

// The cookie that carries the token: one name per port, since browsers do not tell
// ports apart in cookies.
std::string token_cookie_name(int port);

// The value of the cookie `name` in a Cookie header; "" when it has none.
std::string cookie_value(std::string_view header, std::string_view name);

// The token of an Authorization header ("token T" or "Bearer T"); "" for anything else.
std::string authorization_token(std::string_view header);

// Compares in time that does not depend on where they differ; an empty `given` never
// matches.
bool same_token(std::string_view given, std::string_view token);

// The host name of a Host header, lowercased, without its port or IPv6 brackets
// ("LOCALHOST:8765" -> "localhost", "[::1]:80" -> "::1"); "" when malformed.
std::string host_of(std::string_view host_header);

// The names a request may use for this server: the loopback names, the address it
// listens on (unless a wildcard) and this host's name, full and short.
std::vector<std::string> served_host_names(const std::string& bind, const std::string& hostname);

// Whether the Host header names one of `names` (any port: an SSH tunnel changes it).
bool host_allowed(std::string_view host_header, const std::vector<std::string>& names);

}  // namespace dl::exp
