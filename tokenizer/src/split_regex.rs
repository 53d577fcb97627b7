//! The regular expressions of tokenizers' `Split` and `ByteLevel` pre-tokenizers, matched as
//! `tokenizers` matches them natively (fancy-regex over the regex crate): leftmost-first
//! alternation, greedy repetition with backtracking, lookahead. Small on purpose — the browser's
//! `.wasm` has no room for a general regex engine — it runs the syntax those patterns use (GPT-2's,
//! Llama 3's, Qwen's and their like) and refuses anything else by name:
//! - literals and escapes (`\r`, `\n`, `\t`, `\'`, …), `.`, classes `[…]` and `[^…]` with ranges;
//! - `\s` `\S` (White_Space), `\d` `\D` (`\p{Nd}`), `\p{L}` `\p{M}` `\p{N}` `\p{Nd}` and their `\P`
//!   forms (Unicode 16.0, regex-syntax's tables: [`crate::unicode_classes`]);
//! - groups `(…)`, `(?:…)`, `(?i:…)` (over ASCII: a letter matches either case, k the Kelvin sign,
//!   s the long s, as Unicode's simple case folding has it), lookahead
//!   `(?=…)` and `(?!…)`;
//! - `?`, `*`, `+`, `{n}`, `{n,}`, `{n,m}` (greedy), of one character (a class, a literal, `.`)
//!   or of a group that matches a bounded number of times.
//!
//! A pattern that can match the empty string is refused (the regex crate's empty matches split
//! between every character; no tokenizer uses one).

use crate::unicode_classes::{DECIMAL_NUMBER, LETTER, MARK, NUMBER, WORD};

/// A compiled pattern.
#[derive(Clone, Debug)]
pub(crate) struct Regex {
    root: Node,
}

#[derive(Clone, Debug)]
enum Node {
    /// One character of a set.
    One(Set),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    /// `node` from `min` to `max` times, as many as can be first.
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
    /// `(?=…)` (`negated` false) or `(?!…)`.
    Look {
        node: Box<Node>,
        negated: bool,
    },
}

/// A set of characters: the union of `items`, complemented when `negated`.
#[derive(Clone, Debug)]
struct Set {
    negated: bool,
    items: Vec<Item>,
}

#[derive(Clone, Debug)]
enum Item {
    /// A range, inclusive; with `fold`, either end's case variants match too (see [`fold_eq`]).
    Range(char, char, bool),
    Class(Class, bool),
    /// `.`: anything but `\n`.
    AnyButNewline,
}

#[derive(Clone, Copy, Debug)]
enum Class {
    Space,
    Letter,
    Mark,
    Number,
    Decimal,
}

impl Class {
    fn has(self, c: char) -> bool {
        let table = match self {
            Class::Space => return c.is_whitespace(),
            Class::Letter => LETTER,
            Class::Mark => MARK,
            Class::Number => NUMBER,
            Class::Decimal => DECIMAL_NUMBER,
        };
        // ASCII first: most text is.
        if c.is_ascii() {
            return table.iter().take_while(|r| r.0 < 0x80).any(|&(a, b)| a <= c as u32 && c as u32 <= b);
        }
        in_table(table, c)
    }
}

impl Set {
    fn has(&self, c: char) -> bool {
        let hit = self.items.iter().any(|item| match *item {
            Item::Range(a, b, fold) => (a <= c && c <= b) || (fold && variants(c).any(|v| a <= v && v <= b)),
            Item::Class(class, negated) => class.has(c) != negated,
            Item::AnyButNewline => c != '\n',
        });
        hit != self.negated
    }
}

/// What `(?i)` matches beside `c` itself, for the ASCII letters it is allowed on (the parser
/// refuses others): the other case, and the two non-ASCII characters whose simple case folding
/// is an ASCII letter — the Kelvin sign (k) and the long s (s).
fn variants(c: char) -> impl Iterator<Item = char> {
    let other = match c {
        'a'..='z' | 'A'..='Z' => Some((c as u8 ^ 0x20) as char),
        '\u{212a}' => Some('k'),
        '\u{17f}' => Some('s'),
        _ => None,
    };
    let also = match c {
        '\u{212a}' => Some('K'),
        '\u{17f}' => Some('S'),
        _ => None,
    };
    other.into_iter().chain(also)
}

/// Whether `c` is a word character: regex's `\\w` (Unicode's, UTS #18), what an added token
/// matched as a single word must not touch.
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || (!c.is_ascii() && in_table(WORD, c))
}

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    table
        .binary_search_by(|&(a, b)| {
            if b < c {
                std::cmp::Ordering::Less
            } else if a > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Why a pattern is not one this engine runs (named in the tokenizer's refusal).
pub(crate) type Refused = String;

impl Regex {
    pub(crate) fn new(pattern: &str) -> Result<Regex, Refused> {
        let mut p = Parser { chars: pattern.chars().collect(), at: 0, fold: false };
        let root = p.alternation()?;
        if p.at != p.chars.len() {
            return Err(format!("an unbalanced ')' in the regex {pattern:?}"));
        }
        if min_len(&root) == 0 {
            return Err(format!("a regex that matches the empty string ({pattern:?})"));
        }
        Ok(Regex { root })
    }

    /// A pattern matching `literal` as written (not empty).
    pub(crate) fn literal(literal: &str) -> Regex {
        let one = |c| Node::One(Set { negated: false, items: vec![Item::Range(c, c, false)] });
        Regex { root: Node::Concat(literal.chars().map(one).collect()) }
    }

    /// The leftmost-first matches in `text`, in order, as byte ranges (none is empty).
    pub(crate) fn find_iter<'a>(&'a self, text: &'a str) -> impl Iterator<Item = (usize, usize)> + 'a {
        let mut at = 0;
        std::iter::from_fn(move || {
            while at < text.len() {
                let mut end = None;
                m(&self.root, text, at, &mut |e| {
                    end = Some(e);
                    true
                });
                match end {
                    Some(e) => {
                        let start = at;
                        at = e;
                        return Some((start, e));
                    }
                    None => at += text[at..].chars().next().map_or(1, char::len_utf8),
                }
            }
            None
        })
    }
}

/// The fewest characters `node` matches.
fn min_len(node: &Node) -> u32 {
    match node {
        Node::One(_) => 1,
        Node::Concat(nodes) => nodes.iter().map(min_len).sum(),
        Node::Alt(nodes) => nodes.iter().map(min_len).min().unwrap_or(0),
        Node::Repeat { node, min, .. } => min_len(node) * min,
        Node::Look { .. } => 0,
    }
}

/// Matches `node` at `at` in `text`, then calls `k` with where it ended, trying the next way
/// (backtracking) while `k` says no; true when `k` said yes.
fn m(node: &Node, text: &str, at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    match node {
        Node::One(set) => match text[at..].chars().next() {
            Some(c) if set.has(c) => k(at + c.len_utf8()),
            _ => false,
        },
        Node::Concat(nodes) => concat(nodes, text, at, k),
        Node::Alt(nodes) => nodes.iter().any(|n| m(n, text, at, k)),
        Node::Repeat { node, min, max } => match &**node {
            // One character a time: scan as far as it goes, then give back one at a time (no
            // recursion, however long the run).
            Node::One(set) => {
                let (mut end, mut n) = (at, 0usize);
                for c in text[at..].chars() {
                    if max.is_some_and(|max| n >= max as usize) || !set.has(c) {
                        break;
                    }
                    end += c.len_utf8();
                    n += 1;
                }
                // Longest first, stepping back over the characters taken.
                while n >= *min as usize {
                    if k(end) {
                        return true;
                    }
                    let Some(c) = text[at..end].chars().next_back() else { return false };
                    end -= c.len_utf8();
                    n -= 1;
                }
                false
            }
            _ => repeat(node, *min, *max, 0, text, at, k),
        },
        Node::Look { node, negated } => {
            let found = m(node, text, at, &mut |_| true);
            found != *negated && k(at)
        }
    }
}

fn concat(nodes: &[Node], text: &str, at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    match nodes.split_first() {
        None => k(at),
        Some((first, rest)) => m(first, text, at, &mut |e| concat(rest, text, e, k)),
    }
}

/// A repetition of a group, greedy: one more first, then stopping here. (Bounded: see
/// `Parser::quantified`.)
fn repeat(node: &Node, min: u32, max: Option<u32>, done: u32, text: &str, at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    if max.is_none_or(|max| done < max) && m(node, text, at, &mut |e| e > at && repeat(node, min, max, done + 1, text, e, k)) {
        return true;
    }
    done >= min && k(at)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    /// Within `(?i:…)`.
    fold: bool,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        self.at += hit as usize;
        hit
    }

    fn eat_str(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        let hit = self.chars.get(self.at..self.at + n).is_some_and(|w| w.iter().copied().eq(s.chars()));
        if hit {
            self.at += n;
        }
        hit
    }

    fn alternation(&mut self) -> Result<Node, Refused> {
        let mut alts = vec![self.concatenation()?];
        while self.eat('|') {
            alts.push(self.concatenation()?);
        }
        Ok(if alts.len() == 1 { alts.pop().expect("one") } else { Node::Alt(alts) })
    }

    fn concatenation(&mut self) -> Result<Node, Refused> {
        let mut nodes = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            nodes.push(self.quantified(atom)?);
        }
        Ok(if nodes.len() == 1 { nodes.pop().expect("one") } else { Node::Concat(nodes) })
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, Refused> {
        let (min, max) = match self.peek() {
            Some('?') => (0, Some(1)),
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('{') => {
                let start = self.at;
                self.at += 1;
                let number = |p: &mut Parser| {
                    let from = p.at;
                    while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                        p.at += 1;
                    }
                    p.chars[from..p.at].iter().collect::<String>().parse::<u32>().ok()
                };
                let Some(min) = number(self) else {
                    // Not a repetition: a literal '{' (as the regex crate reads it).
                    self.at = start;
                    return Ok(atom);
                };
                let max = if self.eat(',') { number(self) } else { Some(min) };
                if !self.eat('}') || max.is_some_and(|max| max < min) {
                    return Err("a malformed {n,m} repetition in a regex".into());
                }
                self.at -= 1;
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.at += 1;
        if self.peek() == Some('?') || self.peek() == Some('+') {
            return Err("a lazy or possessive repetition in a regex".into());
        }
        if !matches!(atom, Node::One(_)) && max.is_none() {
            return Err("an unbounded repetition of a group in a regex".into());
        }
        if let Node::Look { .. } = atom {
            return Err("a repeated lookahead in a regex".into());
        }
        Ok(Node::Repeat { node: Box::new(atom), min, max })
    }

    fn atom(&mut self) -> Result<Node, Refused> {
        let c = self.peek().ok_or("a regex that ends early")?;
        self.at += 1;
        match c {
            '(' => {
                let saved = self.fold;
                let node = if self.eat_str("?:") {
                    self.alternation()?
                } else if self.eat_str("?i:") {
                    self.fold = true;
                    self.alternation()?
                } else if self.eat_str("?=") || self.eat_str("?!") {
                    let negated = self.chars[self.at - 1] == '!';
                    Node::Look { node: Box::new(self.alternation()?), negated }
                } else if self.peek() == Some('?') {
                    return Err("a regex group of a kind other than (?:…), (?i:…), (?=…), (?!…)".into());
                } else {
                    self.alternation()?
                };
                self.fold = saved;
                if !self.eat(')') {
                    return Err("an unclosed group in a regex".into());
                }
                Ok(node)
            }
            '[' => self.set().map(Node::One),
            '.' => Ok(Node::One(Set { negated: false, items: vec![Item::AnyButNewline] })),
            '\\' => self.escape().map(|item| Node::One(Set { negated: false, items: vec![item] })),
            '^' | '$' => Err("an anchor (^ or $) in a regex".into()),
            '*' | '+' | '?' => Err("a repetition of nothing in a regex".into()),
            c => Ok(Node::One(Set { negated: false, items: vec![self.literal(c)?] })),
        }
    }

    /// A literal character, folded within `(?i:…)` (ASCII only).
    fn literal(&self, c: char) -> Result<Item, Refused> {
        if self.fold && !c.is_ascii() {
            return Err(format!("the case-insensitive non-ASCII character {c:?} in a regex"));
        }
        Ok(Item::Range(c, c, self.fold))
    }

    /// After a backslash: a class, or an escaped character.
    fn escape(&mut self) -> Result<Item, Refused> {
        let c = self.peek().ok_or("a regex that ends in a backslash")?;
        self.at += 1;
        let class = |class, negated| Ok(Item::Class(class, negated));
        match c {
            's' => class(Class::Space, false),
            'S' => class(Class::Space, true),
            'd' => class(Class::Decimal, false),
            'D' => class(Class::Decimal, true),
            'p' | 'P' => {
                let name: String = if self.eat('{') {
                    let from = self.at;
                    while self.peek().is_some_and(|c| c != '}') {
                        self.at += 1;
                    }
                    let name = self.chars[from..self.at].iter().collect();
                    if !self.eat('}') {
                        return Err("an unclosed \\p{…} in a regex".into());
                    }
                    name
                } else {
                    self.peek().map(String::from).inspect(|_| self.at += 1).unwrap_or_default()
                };
                let negated = c == 'P';
                match name.as_str() {
                    "L" | "Letter" => class(Class::Letter, negated),
                    "M" | "Mark" => class(Class::Mark, negated),
                    "N" | "Number" => class(Class::Number, negated),
                    "Nd" | "Decimal_Number" => class(Class::Decimal, negated),
                    other => Err(format!("the Unicode class \\p{{{other}}} in a regex (edo's runs L, M, N, Nd)")),
                }
            }
            'r' => Ok(Item::Range('\r', '\r', false)),
            'n' => Ok(Item::Range('\n', '\n', false)),
            't' => Ok(Item::Range('\t', '\t', false)),
            'f' => Ok(Item::Range('\u{c}', '\u{c}', false)),
            'v' => Ok(Item::Range('\u{b}', '\u{b}', false)),
            c if c.is_ascii_punctuation() || c == ' ' => self.literal(c),
            c => Err(format!("the escape \\{c} in a regex")),
        }
    }

    /// After '[': a set, to its ']'.
    fn set(&mut self) -> Result<Set, Refused> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or("an unclosed [ in a regex")?;
            if c == ']' && !first {
                self.at += 1;
                return Ok(Set { negated, items });
            }
            first = false;
            if c == '[' {
                return Err("a nested class or a class operation in a regex".into());
            }
            self.at += 1;
            let item = if c == '\\' { self.escape()? } else { self.literal(c)? };
            // A range `a-z` (a '-' before ']' is a literal).
            if let Item::Range(a, _, fold) = item {
                if self.peek() == Some('-') && self.chars.get(self.at + 1).is_some_and(|&n| n != ']') {
                    self.at += 1;
                    let end = match self.peek() {
                        Some('\\') => {
                            self.at += 1;
                            match self.escape()? {
                                Item::Range(e, _, _) => e,
                                _ => return Err("a range that ends in a class in a regex".into()),
                            }
                        }
                        Some(e) => {
                            self.at += 1;
                            e
                        }
                        None => return Err("an unclosed [ in a regex".into()),
                    };
                    if end < a {
                        return Err("a range out of order in a regex".into());
                    }
                    if fold && !end.is_ascii() {
                        return Err(format!("the case-insensitive non-ASCII character {end:?} in a regex"));
                    }
                    items.push(Item::Range(a, end, fold));
                    continue;
                }
            }
            items.push(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split<'a>(pattern: &str, text: &'a str) -> Vec<&'a str> {
        Regex::new(pattern).unwrap().find_iter(text).map(|(a, b)| &text[a..b]).collect()
    }

    #[test]
    fn gpt2s_pattern_splits_as_gpt2_does() {
        let gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
        assert_eq!(split(gpt2, "Hello world's   2024 cafés!!  "), ["Hello", " world", "'s", "  ", " 2024", " cafés", "!!", "  "]);
    }

    #[test]
    fn llama3s_pattern_folds_case_and_takes_three_digits() {
        let llama3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        assert_eq!(split(llama3, "I'LL pay 12345 $x\r\n\n ok"), ["I", "'LL", " pay", " ", "123", "45", " $", "x", "\r\n\n", " ok"]);
        assert_eq!(split(llama3, "ſ'ſ"), ["ſ", "'ſ"]);
    }

    #[test]
    fn patterns_it_does_not_run_are_named() {
        for (pattern, part) in [(r"\w+", "\\w"), (r"^a", "anchor"), (r"a*", "empty"), (r"(ab)+", "unbounded"), (r"\p{Lu}", "\\p{Lu}"), ("a+?", "lazy")] {
            let why = Regex::new(pattern).unwrap_err();
            assert!(why.contains(part), "{pattern}: {why}");
        }
    }
}
