//! Parser for the supported subset of Snort 2/3 rule syntax:
//!
//! ```text
//! action proto src_addr src_port direction dst_addr dst_port (option; option:value; …)
//! ```
//!
//! Errors name the part of the rule that is wrong (`source port`,
//! ``option `depth` ``…) and say why; the file loader prefixes them with
//! `file:line` (see [`parse_rules_text`]).

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use sluice_spec::IpNet;

use super::pcre::parse_pcre;
use super::rule::{
    Action, AddrExpr, Content, Direction, FlowDir, FlowOpt, PayloadOpt, PortExpr, Proto, Rule,
};

/// Longest `content` accepted, in bytes.
pub const MAX_CONTENT_LEN: usize = 1024;
/// How deeply variables may refer to variables (also stops cycles).
const MAX_VAR_DEPTH: u32 = 8;

/// Rule variables (`$HOME_NET`…), by name without the `$`.
#[derive(Debug, Clone, Default)]
pub struct Vars(HashMap<String, String>);

impl Vars {
    /// No variables.
    pub fn new() -> Vars {
        Vars::default()
    }

    /// Defines (or redefines) `name` (without `$`).
    pub fn set(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_string(), value.to_string());
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// What is wrong with one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The rule part (`source address`, ``option `depth` ``…), if known.
    pub part: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl RuleError {
    fn at(part: impl Into<String>, message: impl Into<String>) -> RuleError {
        RuleError {
            part: Some(part.into()),
            message: message.into(),
        }
    }

    fn rule(message: impl Into<String>) -> RuleError {
        RuleError {
            part: None,
            message: message.into(),
        }
    }

    fn option(name: &str, message: impl Into<String>) -> RuleError {
        RuleError::at(format!("option `{name}`"), message)
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.part {
            Some(p) => write!(f, "{p}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Parses one rule. `origin` is recorded in the rule (for alerts and
/// duplicate-sid errors), not used in errors.
pub fn parse_rule(text: &str, vars: &Vars, origin: &str) -> Result<Rule, RuleError> {
    let text = text.trim();
    let open = find_outside_brackets(text, '(')
        .ok_or_else(|| RuleError::rule("missing option list `( … )`"))?;
    let header = &text[..open];
    let rest = &text[open + 1..];
    let close = rest
        .rfind(')')
        .ok_or_else(|| RuleError::rule("missing `)` at the end of the option list"))?;
    if !rest[close + 1..].trim().is_empty() {
        return Err(RuleError::rule(format!(
            "unexpected text after the option list: `{}`",
            rest[close + 1..].trim()
        )));
    }
    let mut rule = parse_header(header, vars, origin)?;
    parse_options(&rest[..close], &mut rule)?;
    Ok(rule)
}

fn find_outside_brackets(s: &str, target: char) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if c == target && depth <= 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// Splits at whitespace outside `[…]` (lists may contain spaces after commas).
fn header_tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if c.is_whitespace() && depth <= 0 {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

fn parse_header(header: &str, vars: &Vars, origin: &str) -> Result<Rule, RuleError> {
    let t = header_tokens(header);
    if t.len() != 7 {
        return Err(RuleError::rule(format!(
            "the header needs 7 fields (action proto src_addr src_port direction dst_addr dst_port), found {}: `{}`",
            t.len(),
            header.trim()
        )));
    }
    let action = match t[0] {
        "alert" => Action::Alert,
        "drop" => Action::Drop,
        "pass" => Action::Pass,
        other => {
            return Err(RuleError::at(
                "action",
                format!("unsupported action `{other}` (alert, drop or pass)"),
            ))
        }
    };
    let proto = match t[1] {
        "tcp" => Proto::Tcp,
        "udp" => Proto::Udp,
        "icmp" => Proto::Icmp,
        "ip" => Proto::Ip,
        other => {
            return Err(RuleError::at(
                "protocol",
                format!("unsupported protocol `{other}` (tcp, udp, icmp or ip)"),
            ))
        }
    };
    let src = parse_addr(t[2], vars, 0).map_err(|m| RuleError::at("source address", m))?;
    let src_ports = parse_ports(t[3], vars, 0).map_err(|m| RuleError::at("source port", m))?;
    let direction = match t[4] {
        "->" => Direction::Forward,
        "<>" => Direction::Both,
        other => {
            return Err(RuleError::at(
                "direction",
                format!("expected `->` or `<>`, got `{other}`"),
            ))
        }
    };
    let dst = parse_addr(t[5], vars, 0).map_err(|m| RuleError::at("destination address", m))?;
    let dst_ports = parse_ports(t[6], vars, 0).map_err(|m| RuleError::at("destination port", m))?;
    if matches!(proto, Proto::Icmp | Proto::Ip) {
        for (part, p) in [
            ("source port", &src_ports),
            ("destination port", &dst_ports),
        ] {
            if !p.is_any() {
                return Err(RuleError::at(
                    part,
                    format!("must be `any` for {} rules", t[1]),
                ));
            }
        }
    }
    Ok(Rule {
        action,
        proto,
        src,
        src_ports,
        direction,
        dst,
        dst_ports,
        msg: String::new(),
        sid: 0,
        rev: 1,
        classtype: None,
        flow: FlowOpt::default(),
        payload: Vec::new(),
        origin: origin.to_string(),
    })
}

/// Splits `[a,b,[c,d]]`'s inside at top-level commas.
fn split_list(inner: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(inner[start..].trim());
    out
}

fn var<'v>(name: &str, vars: &'v Vars, depth: u32) -> Result<&'v str, String> {
    if depth >= MAX_VAR_DEPTH {
        return Err(format!(
            "variable `${name}` nests more than {MAX_VAR_DEPTH} levels deep (does it refer to itself?)"
        ));
    }
    vars.get(name)
        .ok_or_else(|| format!("undefined variable `${name}`"))
}

/// Parses an address expression.
pub fn parse_addr(s: &str, vars: &Vars, depth: u32) -> Result<AddrExpr, String> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('!') {
        let inner = parse_addr(rest, vars, depth)?;
        if inner == AddrExpr::Any {
            return Err("`!any` matches no address".to_string());
        }
        return Ok(AddrExpr::Not(Box::new(inner)));
    }
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("unbalanced `[` in `{s}`"))?;
        if inner.trim().is_empty() {
            return Err("empty address list `[]`".to_string());
        }
        let items = split_list(inner)
            .into_iter()
            .map(|i| parse_addr(i, vars, depth))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(AddrExpr::List(items));
    }
    if let Some(name) = s.strip_prefix('$') {
        return parse_addr(var(name, vars, depth)?, vars, depth + 1);
    }
    if s == "any" {
        return Ok(AddrExpr::Any);
    }
    if let Ok(n) = s.parse::<IpNet>() {
        return Ok(AddrExpr::Net(n.trunc()));
    }
    if let Ok(a) = s.parse::<IpAddr>() {
        return Ok(AddrExpr::Net(IpNet::from(a)));
    }
    Err(format!(
        "invalid address `{s}` (expected any, an address, a CIDR prefix, a [list] or a $VARIABLE)"
    ))
}

/// Parses a port expression.
pub fn parse_ports(s: &str, vars: &Vars, depth: u32) -> Result<PortExpr, String> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('!') {
        let inner = parse_ports(rest, vars, depth)?;
        if inner == PortExpr::Any {
            return Err("`!any` matches no port".to_string());
        }
        return Ok(PortExpr::Not(Box::new(inner)));
    }
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("unbalanced `[` in `{s}`"))?;
        if inner.trim().is_empty() {
            return Err("empty port list `[]`".to_string());
        }
        let items = split_list(inner)
            .into_iter()
            .map(|i| parse_ports(i, vars, depth))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(PortExpr::List(items));
    }
    if let Some(name) = s.strip_prefix('$') {
        return parse_ports(var(name, vars, depth)?, vars, depth + 1);
    }
    if s == "any" {
        return Ok(PortExpr::Any);
    }
    let port = |p: &str| -> Result<u16, String> {
        p.parse::<u16>().map_err(|_| {
            format!("invalid port `{s}` (expected any, N, A:B, A:, :B, a [list] or a $VARIABLE; ports are 0-65535)")
        })
    };
    match s.split_once(':') {
        None => port(s).map(|p| PortExpr::Range(p, p)),
        Some((lo, hi)) => {
            if lo.is_empty() && hi.is_empty() {
                return Err(format!("invalid port range `{s}`"));
            }
            let lo = if lo.is_empty() { 0 } else { port(lo)? };
            let hi = if hi.is_empty() { u16::MAX } else { port(hi)? };
            if lo > hi {
                return Err(format!("port range `{s}` is reversed"));
            }
            Ok(PortExpr::Range(lo, hi))
        }
    }
}

/// Splits the option list at `;` outside quoted strings.
fn split_options(s: &str) -> Result<Vec<&str>, RuleError> {
    let mut out = Vec::new();
    let mut in_quote = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '"' => in_quote = !in_quote,
            ';' if !in_quote => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if in_quote {
        return Err(RuleError::rule(
            "unterminated quoted string in the option list",
        ));
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    Ok(out.into_iter().filter(|o| !o.is_empty()).collect())
}

/// Reads a `"…"` string at the start of `v` (after an optional `!` the
/// caller removed). Returns the raw inside (escapes kept) and what follows.
fn quoted(v: &str) -> Result<(&str, &str), String> {
    let Some(body) = v.strip_prefix('"') else {
        return Err(format!("expected a quoted string, got `{v}`"));
    };
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            return Ok((&body[..i], &body[i + 1..]));
        }
    }
    Err("unterminated quoted string".to_string())
}

/// Removes backslash escapes (`\"`, `\\`, `\;`, `\:`…).
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Decodes content text with `|hex|` sections and backslash escapes.
pub fn decode_content(raw: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut chars = raw.chars();
    let mut in_hex = false;
    let mut nibble: Option<u8> = None;
    while let Some(c) = chars.next() {
        if in_hex {
            match c {
                '|' => {
                    if nibble.is_some() {
                        return Err("odd number of hex digits in `|…|`".to_string());
                    }
                    in_hex = false;
                }
                c if c.is_ascii_whitespace() => {
                    if nibble.is_some() {
                        return Err("hex bytes in `|…|` must be pairs of digits".to_string());
                    }
                }
                c => {
                    let d = c
                        .to_digit(16)
                        .ok_or_else(|| format!("invalid hex digit `{c}` in `|…|`"))?
                        as u8;
                    match nibble.take() {
                        Some(hi) => out.push(hi << 4 | d),
                        None => nibble = Some(d),
                    }
                }
            }
            continue;
        }
        match c {
            '|' => in_hex = true,
            '\\' => match chars.next() {
                Some(n @ ('"' | '\\' | ';' | ':' | '|')) => out.push(n as u8),
                Some(n) => {
                    return Err(format!(
                        "invalid escape `\\{n}` (escape only \", \\, ;, : and |; write other bytes as |hex|)"
                    ))
                }
                None => return Err("trailing `\\`".to_string()),
            },
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    if in_hex {
        return Err("unterminated `|` hex section".to_string());
    }
    if out.is_empty() {
        return Err("empty content".to_string());
    }
    if out.len() > MAX_CONTENT_LEN {
        return Err(format!(
            "content is {} bytes long (at most {MAX_CONTENT_LEN})",
            out.len()
        ));
    }
    Ok(out)
}

fn parse_u32(name: &str, v: Option<&str>) -> Result<u32, RuleError> {
    let v = need_value(name, v)?;
    v.parse::<u32>()
        .map_err(|_| RuleError::option(name, format!("expected a non-negative integer, got `{v}`")))
}

fn need_value<'a>(name: &str, v: Option<&'a str>) -> Result<&'a str, RuleError> {
    match v {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(RuleError::option(name, "needs a value")),
    }
}

fn no_value(name: &str, v: Option<&str>) -> Result<(), RuleError> {
    match v {
        None => Ok(()),
        Some(v) => Err(RuleError::option(
            name,
            format!("takes no value, got `{v}`"),
        )),
    }
}

fn parse_options(list: &str, rule: &mut Rule) -> Result<(), RuleError> {
    let mut seen_sid = false;
    let mut seen_msg = false;
    let mut seen_rev = false;
    let mut seen_flow = false;
    for opt in split_options(list)? {
        let (name, value) = match opt.split_once(':') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (opt.trim(), None),
        };
        let once = |seen: &mut bool| {
            if std::mem::replace(seen, true) {
                Err(RuleError::option(name, "given twice"))
            } else {
                Ok(())
            }
        };
        match name {
            "msg" => {
                once(&mut seen_msg)?;
                let v = need_value(name, value)?;
                let (raw, rest) = quoted(v).map_err(|m| RuleError::option(name, m))?;
                if !rest.trim().is_empty() {
                    return Err(RuleError::option(name, format!("unexpected `{}` after the string", rest.trim())));
                }
                rule.msg = unescape(raw);
            }
            "sid" => {
                once(&mut seen_sid)?;
                rule.sid = parse_u32(name, value)?;
                if rule.sid == 0 {
                    return Err(RuleError::option(name, "must be at least 1"));
                }
            }
            "rev" => {
                once(&mut seen_rev)?;
                rule.rev = parse_u32(name, value)?;
            }
            "gid" => {
                if parse_u32(name, value)? != 1 {
                    return Err(RuleError::option(name, "only gid 1 (text rules) is supported"));
                }
            }
            "classtype" => {
                let v = need_value(name, value)?;
                if !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                    return Err(RuleError::option(name, format!("invalid class name `{v}`")));
                }
                rule.classtype = Some(v.to_string());
            }
            // Informational: accepted so that real rule files load.
            "reference" | "metadata" | "priority" => {
                need_value(name, value)?;
            }
            "flow" => {
                once(&mut seen_flow)?;
                rule.flow = parse_flow(need_value(name, value)?)?;
            }
            "content" => {
                let v = need_value(name, value)?;
                let (negated, v) = match v.strip_prefix('!') {
                    Some(r) => (true, r.trim_start()),
                    None => (false, v),
                };
                let (raw, rest) = quoted(v).map_err(|m| RuleError::option(name, m))?;
                let pattern = decode_content(raw).map_err(|m| RuleError::option(name, m))?;
                rule.payload.push(PayloadOpt::Content(Content::new(pattern, negated)));
                // Snort 3 style: content:"abc", nocase, offset 2;
                let rest = rest.trim();
                if !rest.is_empty() {
                    let Some(mods) = rest.strip_prefix(',') else {
                        return Err(RuleError::option(name, format!("unexpected `{rest}` after the string")));
                    };
                    for m in mods.split(',') {
                        let m = m.trim();
                        let (mname, mval) = match m.split_once(char::is_whitespace) {
                            Some((a, b)) => (a, Some(b.trim())),
                            None => (m, None),
                        };
                        content_modifier(rule, mname, mval)?;
                    }
                }
            }
            "nocase" | "offset" | "depth" | "distance" | "within" | "fast_pattern" | "rawbytes" => {
                content_modifier(rule, name, value)?;
            }
            "pcre" => {
                let v = need_value(name, value)?;
                let (negated, v) = match v.strip_prefix('!') {
                    Some(r) => (true, r.trim_start()),
                    None => (false, v),
                };
                let (raw, rest) = quoted(v).map_err(|m| RuleError::option(name, m))?;
                if !rest.trim().is_empty() {
                    return Err(RuleError::option(name, format!("unexpected `{}` after the string", rest.trim())));
                }
                let p = parse_pcre(raw, negated).map_err(|m| RuleError::option(name, m))?;
                rule.payload.push(PayloadOpt::Pcre(p));
            }
            "" => return Err(RuleError::rule("empty option name")),
            other => {
                return Err(RuleError::option(
                    other,
                    "unsupported (supported: msg, content with nocase/offset/depth/distance/within/fast_pattern, pcre, flow, sid, rev, gid, classtype, reference, metadata, priority)",
                ))
            }
        }
    }
    if !seen_sid {
        return Err(RuleError::rule("missing `sid` option"));
    }
    Ok(())
}

fn content_modifier(rule: &mut Rule, name: &str, value: Option<&str>) -> Result<(), RuleError> {
    let Some(PayloadOpt::Content(c)) = rule.payload.last_mut() else {
        return Err(RuleError::option(name, "must follow a `content` option"));
    };
    let set = |slot: &mut Option<u32>, v: u32| {
        if slot.replace(v).is_some() {
            Err(RuleError::option(name, "given twice for the same content"))
        } else {
            Ok(())
        }
    };
    let len = c.pattern.len();
    match name {
        "nocase" => {
            no_value(name, value)?;
            c.nocase = true;
        }
        "rawbytes" => no_value(name, value)?,
        "fast_pattern" => {
            if value.is_some_and(|v| v != "only") {
                return Err(RuleError::option(name, format!("unsupported argument `{}` (none or `only`)", value.unwrap_or(""))));
            }
            if c.negated {
                return Err(RuleError::option(name, "a negated content cannot be the fast pattern"));
            }
            c.fast_pattern = true;
        }
        "offset" | "depth" => {
            if c.is_relative() {
                return Err(RuleError::option(name, "cannot be combined with distance/within on the same content"));
            }
            let v = parse_u32(name, value)?;
            if name == "offset" {
                set(&mut c.offset, v)?;
            } else {
                if (v as usize) < len {
                    return Err(RuleError::option(name, format!("depth {v} is shorter than the content ({len} bytes)")));
                }
                set(&mut c.depth, v)?;
            }
        }
        "distance" => {
            if c.offset.is_some() || c.depth.is_some() {
                return Err(RuleError::option(name, "cannot be combined with offset/depth on the same content"));
            }
            let v = need_value(name, value)?;
            let d = v.parse::<i32>().map_err(|_| RuleError::option(name, format!("expected an integer, got `{v}`")))?;
            if c.distance.replace(d).is_some() {
                return Err(RuleError::option(name, "given twice for the same content"));
            }
        }
        "within" => {
            if c.offset.is_some() || c.depth.is_some() {
                return Err(RuleError::option(name, "cannot be combined with offset/depth on the same content"));
            }
            let v = parse_u32(name, value)?;
            if (v as usize) < len {
                return Err(RuleError::option(name, format!("within {v} is shorter than the content ({len} bytes)")));
            }
            set(&mut c.within, v)?;
        }
        other => {
            return Err(RuleError::option(
                other,
                "unsupported content modifier (nocase, offset, depth, distance, within, fast_pattern, rawbytes)",
            ))
        }
    }
    Ok(())
}

fn parse_flow(v: &str) -> Result<FlowOpt, RuleError> {
    let mut f = FlowOpt::default();
    for item in v.split(',') {
        let item = item.trim();
        let (dir, est) = match item {
            "to_server" | "from_client" => (Some(FlowDir::ToServer), None),
            "to_client" | "from_server" => (Some(FlowDir::ToClient), None),
            "established" => (None, Some(true)),
            "not_established" => (None, Some(false)),
            "stateless" => (None, None),
            other => {
                return Err(RuleError::option(
                    "flow",
                    format!("unsupported flow keyword `{other}` (to_server, from_client, to_client, from_server, established, not_established, stateless)"),
                ))
            }
        };
        if let Some(d) = dir {
            if f.dir != FlowDir::Any && f.dir != d {
                return Err(RuleError::option("flow", "conflicting directions"));
            }
            f.dir = d;
        }
        if let Some(e) = est {
            if f.established.is_some_and(|x| x != e) {
                return Err(RuleError::option(
                    "flow",
                    "both established and not_established",
                ));
            }
            f.established = Some(e);
        }
    }
    Ok(f)
}

/// A rules file or text that failed to load: the message starts with
/// `name:line:`.
pub type LoadError = String;

/// Parses a rules text (a file's contents): one rule per line, `#`
/// comments, blank lines, `\` line continuations and `var`/`ipvar`/
/// `portvar NAME value` definitions (added to `vars`). `name` prefixes
/// errors (`local.rules:12: option `depth`: …`).
pub fn parse_rules_text(text: &str, name: &str, vars: &mut Vars) -> Result<Vec<Rule>, LoadError> {
    let mut rules: Vec<Rule> = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let lineno = i + 1;
        let mut logical = line.trim().to_string();
        while logical.ends_with('\\') {
            logical.pop();
            match lines.next() {
                Some((_, next)) => {
                    logical.push(' ');
                    logical.push_str(next.trim());
                }
                None => break,
            }
        }
        let l = logical.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let first = l.split_whitespace().next().unwrap_or("");
        if matches!(first, "var" | "ipvar" | "portvar") {
            let mut parts = l.splitn(3, char::is_whitespace);
            parts.next();
            let (Some(vname), Some(value)) = (parts.next(), parts.next()) else {
                return Err(format!(
                    "{name}:{lineno}: `{first}` needs a name and a value"
                ));
            };
            vars.set(vname.trim_start_matches('$'), value.trim());
            continue;
        }
        let origin = format!("{name}:{lineno}");
        let rule = parse_rule(l, vars, &origin).map_err(|e| format!("{origin}: {e}"))?;
        rules.push(rule);
    }
    Ok(rules)
}

/// Rejects duplicate sids across every loaded rule (alerts and per-rule
/// counters are reported by sid, so a duplicate would be ambiguous).
pub fn check_unique_sids(rules: &[Rule]) -> Result<(), LoadError> {
    let mut seen: HashMap<u32, &str> = HashMap::with_capacity(rules.len());
    for r in rules {
        if let Some(prev) = seen.insert(r.sid, &r.origin) {
            return Err(format!(
                "{}: sid {} is already used by the rule at {prev}",
                r.origin, r.sid
            ));
        }
    }
    Ok(())
}
