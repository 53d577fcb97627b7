//! The library's modules depend on each other one way (ARCHITECTURE.md: "Dependencies point one
//! way"): the module graph of `src/` has no cycle, at two levels.
//!
//! - The crate's top-level modules (`src/x.rs`, `src/x/`; `lib.rs` is the hub, not a node).
//! - The child files of each directory module (`src/gpu/cache.rs`, …; its `mod.rs` is the hub).
//!
//! An edge A → B is a path in A's files that names B: `crate::b::…`, `super::b::…`, a
//! `use crate::{…}` group naming `b`, or a name that a hub re-exports from B (`crate::Error` is
//! `error`'s, `super::GpuTable` in `gpu/` is `table`'s). Names a hub defines itself or takes from
//! other crates are no edge; a glob (`use super::*`) counts as the module it names. Comments,
//! string literals and `#[cfg(test)] mod` items are left out: test code may depend on anything.
//!
//! One module is vocabulary, not a layer: `error`, the crate's one error type. Every module
//! returns it, and its variants carry the values they report (a `Format`, an `EncodeError`), so
//! its own edges are not followed — it holds no logic that could call back into a layer.
//!
//! Each crate of the workspace is checked on its own (`src/` is edo's, `core/src/` edo-core's,
//! `gpu/src/` edo-gpu's, `tokenizer/src/` edo-tokenizer's); the order between crates is the
//! compiler's to keep. Runs under cargo, or alone from the
//! workspace's root: `rustc --edition 2021 --test tests/modules.rs -o /tmp/m && /tmp/m`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A module's path from the crate root: `[]` is lib.rs, `["gpu", "cache"]` is src/gpu/cache.rs.
type ModPath = Vec<String>;

/// The workspace's root: cargo's manifest directory, or the current one when run alone.
fn workspace() -> PathBuf {
    option_env!("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// edo's `src/`.
fn src_root() -> PathBuf {
    workspace().join("src")
}

/// The sources of every library crate of the workspace: edo's, edo-core's, edo-gpu's and
/// edo-tokenizer's.
fn crate_roots() -> [PathBuf; 4] {
    [src_root(), workspace().join("core/src"), workspace().join("gpu/src"), workspace().join("tokenizer/src")]
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments and the insides of string and char literals blanked, newlines kept.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, ch)| c.get(i + k) == Some(&ch));
    let find = |from: usize, s: &str| (from..c.len()).find(|&j| at(j, s)).unwrap_or(c.len());
    let (mut out, mut i) = (c.clone(), 0);
    while i < c.len() {
        let raw = if i > 0 && is_ident(c[i - 1]) { None } else { ["r", "br", "cr"].into_iter().find(|p| at(i, p)).map(|p| i + p.len()) };
        let hashes = raw.map_or(0, |p| (p..c.len()).take_while(|&j| c[j] == '#').count());
        // The comment or literal that starts here: (what to blank, where to go on).
        let (blank, next) = if at(i, "//") {
            (i..find(i, "\n"), find(i, "\n"))
        } else if at(i, "/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                let (open, close) = (at(j, "/*"), at(j, "*/"));
                depth += i32::from(open) - i32::from(close);
                j += if open || close { 2 } else { 1 };
            }
            (i..j, j)
        } else if let Some(p) = raw.filter(|&p| c.get(p + hashes) == Some(&'"')) {
            let close = format!("\"{}", "#".repeat(hashes));
            let end = find(p + hashes + 1, &close);
            (p + hashes + 1..end, end + close.len())
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            (i + 1..j, j + 1)
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            (i + 1..find(i + 3, "'"), find(i + 3, "'") + 1)
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            (i + 1..i + 2, i + 3) // 'x'; a quote without a closing one starts a lifetime
        } else {
            (i..i, i + 1)
        };
        out[blank.start..blank.end.min(c.len())].iter_mut().filter(|ch| **ch != '\n').for_each(|ch| *ch = ' ');
        i = next;
    }
    out.into_iter().collect()
}

struct Tok {
    text: String,
    line: usize,
}

/// Words, `::`, and single characters, each with its line (from 1).
fn tokenize(t: &str) -> Vec<Tok> {
    let t: Vec<char> = t.chars().collect();
    let (mut toks, mut i, mut line) = (Vec::new(), 0, 1);
    while i < t.len() {
        let end =
            if is_ident(t[i]) { (i..t.len()).find(|&j| !is_ident(t[j])).unwrap_or(t.len()) } else { i + if t[i..].starts_with(&[':', ':']) { 2 } else { 1 } };
        if t[i] == '\n' {
            line += 1;
        } else if !t[i].is_whitespace() {
            toks.push(Tok { text: t[i..end].iter().collect(), line });
        }
        i = end;
    }
    toks
}

/// The index of the token that closes the bracket at `open`.
fn closing(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(open) {
        depth += match t.text.as_str() {
            "{" | "[" | "(" => 1,
            "}" | "]" | ")" => -1,
            _ => 0,
        };
        if depth == 0 {
            return j;
        }
    }
    toks.len()
}

/// One path of a use tree or an expression as written (`crate::gpu::GpuTable`), with the name it
/// binds (its last segment, or what follows `as`) and its line.
struct Leaf {
    path: Vec<String>,
    name: String,
    line: usize,
}

/// Parses the path or use tree at `toks[i]` (groups nested to any depth) into `out`, each leaf
/// with `prefix` in front; returns the index after it.
fn parse_tree(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let text = |i: usize| toks.get(i).map_or("", |t| t.text.as_str());
    let mut path = prefix.to_vec();
    while let Some(tok) = toks.get(i) {
        if tok.text == "{" {
            i += 1;
            while i < toks.len() && text(i) != "}" {
                let after = parse_tree(toks, i, &path, out);
                i = if text(after) == "," { after + 1 } else { after.max(i + 1) };
            }
            return i + 1;
        } else if tok.text == "*" || !tok.text.starts_with(is_ident) {
            let name = if tok.text == "*" { "*".to_string() } else { path.last().cloned().unwrap_or_default() };
            if path.len() > prefix.len() || tok.text == "*" {
                out.push(Leaf { path, name, line: tok.line }); // `a::*`, or `a::<T>`: the path ends before its generics
            }
            return i + usize::from(tok.text == "*");
        }
        path.push(tok.text.clone());
        i += 1;
        if text(i) == "::" {
            i += 1;
            continue;
        }
        if path.last().is_some_and(|s| s == "self") {
            path.pop(); // `a::{self, …}`
        }
        let mut name = path.last().cloned().unwrap_or_default();
        if text(i) == "as" {
            name = text(i + 1).to_string();
            i += 2;
        }
        out.push(Leaf { path, name, line: tok.line });
        return i;
    }
    i
}

/// `path` made absolute from inside `module`; None for a path that starts with a local name or
/// another crate.
fn absolute(path: &[String], module: &[String]) -> Option<ModPath> {
    let (mut base, mut rest) = (module.to_vec(), path);
    match rest.first()?.as_str() {
        "crate" => (base, rest) = (vec![], &rest[1..]),
        "self" => rest = &rest[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    Some([base, rest.to_vec()].concat())
}

/// What one file says about modules.
#[derive(Default)]
struct Scan {
    /// Each path that starts with `crate::` or `super::`, made absolute, as written, and its line.
    refs: Vec<(ModPath, String, usize)>,
    /// The names its top-level `use` items bind, and their paths as written.
    uses: Vec<(String, Vec<String>)>,
    /// The modules it declares (`mod x;`), and those of them that are `#[cfg(test)]`.
    mods: Vec<String>,
    test_mods: Vec<String>,
}

fn scan(toks: &[Tok], module: &[String]) -> Scan {
    let text = |i: usize| toks.get(i).map_or("", |t| t.text.as_str());
    let (mut s, mut inline, mut pending, mut depth, mut i) = (Scan::default(), Vec::<(String, usize)>::new(), None, 0, 0);
    while i < toks.len() {
        // `#[cfg(test)]` (or `#[cfg(all(test, …))]`) first on its line, then maybe more attributes
        // and `pub(…)`, then `mod`.
        let test_cfg = |p: &[&str]| p.iter().enumerate().all(|(k, t)| text(i + k) == *t);
        if (i == 0 || toks[i - 1].line < toks[i].line)
            && (test_cfg(&["#", "[", "cfg", "(", "test", ")"]) || test_cfg(&["#", "[", "cfg", "(", "all", "(", "test", ","]))
        {
            let mut j = closing(toks, i + 1) + 1;
            while text(j) == "#" || text(j) == "pub" {
                j = if text(j + 1) == "[" || text(j + 1) == "(" { closing(toks, j + 1) + 1 } else { j + 1 };
            }
            if text(j) == "mod" && text(j + 2) == ";" {
                s.test_mods.push(text(j + 1).to_string());
            } else if text(j) == "mod" && text(j + 2) == "{" {
                i = closing(toks, j + 2) + 1;
                continue;
            }
        }
        match text(i) {
            "mod" if text(i + 2) == ";" => s.mods.push(text(i + 1).to_string()),
            "mod" if text(i + 2) == "{" => pending = Some(text(i + 1).to_string()),
            "{" => {
                depth += 1;
                inline.extend(pending.take().map(|name| (name, depth)));
            }
            "}" => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            "use" | "crate" | "super" if text(i) == "use" || text(i + 1) == "::" && text(i.wrapping_sub(1)) != "::" => {
                let is_use = text(i) == "use";
                let mut leaves = Vec::new();
                let end = parse_tree(toks, i + usize::from(is_use), &[], &mut leaves);
                // `super` counts from the inline module (`mod x { … }`) it is written in.
                let here: ModPath = module.iter().cloned().chain(inline.iter().map(|m| m.0.clone())).collect();
                for leaf in leaves {
                    if let Some(abs) = absolute(&leaf.path, &here) {
                        s.refs.push((abs, leaf.path.join("::"), leaf.line));
                    }
                    if is_use && depth == 0 {
                        s.uses.push((leaf.name, leaf.path));
                    }
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    s
}

struct Source {
    rel: String,
    module: ModPath,
    lines: Vec<String>,
    scan: Scan,
}

struct Crate {
    files: Vec<Source>,
    modules: BTreeSet<ModPath>,
    /// The modules with children: `[]` (lib.rs) and each directory module.
    hubs: BTreeSet<ModPath>,
    /// Per hub, what its top-level `use` items bind (private ones too: a child reaches them as
    /// `super::Name`): name → absolute path. A path through any other module names that module.
    aliases: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

impl Crate {
    fn load(root: &Path) -> Crate {
        let mut paths = Vec::new();
        rust_files(root, &mut paths);
        let mut files: Vec<Source> = paths
            .iter()
            .map(|path| {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                let mut module: ModPath = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                    module.pop();
                }
                let src = std::fs::read_to_string(path).unwrap();
                let scan = scan(&tokenize(&strip(&src)), &module);
                Source { rel: format!("src/{rel}"), lines: src.lines().map(String::from).collect(), module, scan }
            })
            .collect();
        // A file is a module where its parent declares it (edo-gpu's build.rs includes its src/wgsl_min.rs).
        let declared = |test: bool| -> BTreeSet<ModPath> {
            let names = |f: &Source| if test { f.scan.test_mods.clone() } else { f.scan.mods.clone() };
            files.iter().flat_map(|f| names(f).into_iter().map(|m| [f.module.clone(), vec![m]].concat())).collect()
        };
        let (declared, test_only) = (declared(false), declared(true));
        files.retain(|f| (1..=f.module.len()).all(|k| declared.contains(&f.module[..k]) && !test_only.contains(&f.module[..k])));
        let modules: BTreeSet<ModPath> = files.iter().map(|f| f.module.clone()).collect();
        let hubs: BTreeSet<ModPath> = modules.iter().filter(|m| modules.iter().any(|c| c.len() > m.len() && c.starts_with(m))).cloned().collect();
        let mut aliases: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
        for f in files.iter().filter(|f| hubs.contains(&f.module)) {
            for (name, path) in f.scan.uses.iter().filter(|(name, _)| name != "*" && name != "_") {
                // `use b::X` is relative where the module has a child `b`, else from another crate.
                let local = modules.contains(&[f.module.clone(), vec![path[0].clone()]].concat());
                let target = absolute(path, &f.module).or_else(|| local.then(|| [f.module.clone(), path.clone()].concat()));
                aliases.entry(f.module.clone()).or_default().extend(target.map(|t| (name.clone(), t)));
            }
        }
        Crate { files, modules, hubs, aliases }
    }

    /// The deepest module that `path` (absolute) lands in, through hubs' re-exports: `["GpuTable"]`
    /// is in `["gpu", "table"]`, `["block_on"]` (pollster's) in `[]`.
    fn resolve(&self, path: &[String], hops: usize) -> ModPath {
        let mut module = ModPath::new();
        for (k, seg) in path.iter().enumerate() {
            let child = [module.clone(), vec![seg.clone()]].concat();
            if self.modules.contains(&child) {
                module = child;
            } else if let Some(target) = self.aliases.get(&module).and_then(|a| a.get(seg)).filter(|_| hops < 16) {
                return self.resolve(&[target.clone(), path[k + 1..].to_vec()].concat(), hops + 1);
            } else {
                break;
            }
        }
        module
    }

    /// The graph of `hub`'s children, each edge with its first example: "file:line: text (path)".
    fn graph(&self, hub: &[String]) -> Graph {
        let child = |m: &ModPath| (m.len() > hub.len() && m.starts_with(hub)).then(|| m[hub.len()].clone());
        let mut g = Graph { nodes: self.modules.iter().filter_map(child).collect(), edges: BTreeMap::new() };
        for f in &self.files {
            let Some(from) = child(&f.module) else { continue };
            if hub.is_empty() && VOCABULARY.contains(&from.as_str()) {
                continue;
            }
            for (abs, written, line) in &f.scan.refs {
                let Some(to) = child(&self.resolve(abs, 0)).filter(|to| *to != from) else { continue };
                let example = || format!("{}:{line}: {}   ({written})", f.rel, f.lines[line - 1].trim());
                g.edges.entry((from.clone(), to)).or_insert_with(example);
            }
        }
        g
    }
}

/// Top-level modules whose own edges are not followed (see the module's doc).
const VOCABULARY: &[&str] = &["error"];

struct Graph {
    nodes: BTreeSet<String>,
    edges: BTreeMap<(String, String), String>,
}

impl Graph {
    /// The shortest path `from` → … → `to`, of one edge at least, inside `within`.
    fn path(&self, from: &str, to: &str, within: &BTreeSet<String>) -> Option<Vec<String>> {
        let (mut parent, mut queue) = (BTreeMap::<&str, &str>::new(), VecDeque::from([from]));
        while let Some(n) = queue.pop_front() {
            let next: Vec<&str> = self.edges.keys().filter(|(a, b)| a == n && within.contains(b)).map(|(_, b)| b.as_str()).collect();
            for s in next {
                if parent.contains_key(s) {
                    continue;
                }
                parent.insert(s, n);
                if s == to {
                    let mut path = vec![to];
                    while path.len() == 1 || *path.last().unwrap() != from {
                        path.push(parent[path.last().unwrap()]);
                    }
                    return Some(path.into_iter().rev().map(String::from).collect());
                }
                queue.push_back(s);
            }
        }
        None
    }

    /// The strongly connected components of more than one node: each cycle, with one example
    /// per edge, then every other edge inside the component (each on a cycle a fix must break).
    fn report(&self, level: &str) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let linked = |m: &String| m == n || self.path(n, m, &self.nodes).is_some() && self.path(m, n, &self.nodes).is_some();
            let scc: BTreeSet<String> = self.nodes.iter().filter(|m| linked(m)).cloned().collect();
            if scc.len() < 2 || scc.iter().any(|m| m < n) {
                continue;
            }
            let cycle = self.path(n, n, &scc).unwrap();
            out += &format!("{level}: a cycle among {{{}}}\n  {}\n", scc.iter().cloned().collect::<Vec<_>>().join(", "), cycle.join(" → "));
            let on_cycle: Vec<(String, String)> = cycle.windows(2).map(|w| (w[0].clone(), w[1].clone())).collect();
            for (a, b) in &on_cycle {
                out += &format!("    {a} → {b}: {}\n", self.edges[&(a.clone(), b.clone())]);
            }
            let others: Vec<_> = self.edges.iter().filter(|(e, _)| scc.contains(&e.0) && scc.contains(&e.1) && !on_cycle.contains(e)).collect();
            if !others.is_empty() {
                out += "  the component's other edges, each with the shortest cycle it closes:\n";
            }
            for ((a, b), example) in others {
                out += &format!("    {a} → {b}: {example}\n      {a} → {}\n", self.path(b, a, &scc).unwrap().join(" → "));
            }
        }
        out
    }
}

fn level(hub: &[String]) -> String {
    if hub.is_empty() {
        "top level (src/)".into()
    } else {
        format!("inside src/{}/", hub.join("/"))
    }
}

#[test]
fn module_graph_has_no_cycles() {
    for root in crate_roots() {
        let krate = Crate::load(&root);
        assert!(krate.modules.len() > 1, "{}: no modules found", root.display());
        let report: String = krate.hubs.iter().map(|hub| krate.graph(hub).report(&level(hub))).collect();
        assert!(report.is_empty(), "{}: the module graph has cycles (ARCHITECTURE.md: dependencies point one way):\n\n{report}", root.display());
    }
}

#[test]
fn scanner_sees_the_graph() {
    let src = r##"use crate::{a::{b, c::{self, D}}, E as F};
// crate::x and /* crate::y /* nested */ crate::y */
let s = "crate::z \" crate::z"; let r = r#"crate::z"#; let q = '"'; let l: &'static str = "";
#[cfg(test)]
mod tests { use crate::w; }
super::v::<T>::f(); $crate::m!(); crate::S { x: 1 }; pub(crate) fn g() {}"##;
    let refs: Vec<String> = scan(&tokenize(&strip(src)), &["here".into()]).refs.into_iter().map(|r| r.0.join("::")).collect();
    assert_eq!(refs, ["a::b", "a::c", "a::c::D", "E", "v", "m", "S"]);

    let krate = Crate::load(&src_root());
    let edge = |g: &Graph, a: &str, b: &str| g.edges.contains_key(&(a.to_string(), b.to_string()));
    let top = krate.graph(&[]);
    assert!(top.nodes.len() >= 10, "top-level modules: {:?}", top.nodes);
    assert!(edge(&top, "gpu", "hash"), "no edge gpu → hash among {:?}", top.edges.keys());
    assert!(edge(&top, "gpu", "error"), "crate::Error is not seen as error's");
    let gpu = krate.graph(&["gpu".to_string()]);
    assert!(gpu.nodes.len() >= 5 && !gpu.edges.is_empty(), "src/gpu/: {:?} {:?}", gpu.nodes, gpu.edges.keys());
}
