//! The dependency rule, checked (`docs/architecture.md#dependencies-point-one-way`):
//! every file's `crate::` and `super::` paths, outside its tests, resolved to the file
//! that holds them. The foundation imports no domain; each domain imports only those
//! before it, never `server/`, a page or the shell; and no two files import each
//! other through such paths, directly or round a circle (a parent's `use child::…` of
//! its own submodules is how it shows its parts, and is not read).
//!
//! No file stands apart: each domain's handlers get the handles they need from its
//! own `context` (assembled by `server/`, the composition root), never a state of the
//! server's.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The foundation: what every domain may import.
const FOUNDATION: [&str; 12] = [
    "error",
    "body",
    "browser",
    "client_ip",
    "backend",
    "bus",
    "shutdown",
    "config",
    "order_ids",
    "money",
    "rfc3339",
    "wire",
];
/// The domains, each after those it may import (`worker` and `live` both come last and
/// import neither the other).
const DOMAINS: [&str; 8] = ["audit", "auth", "voucher", "orders", "report", "sale", "worker", "live"];
/// What no domain imports: the server, the pages and the shell, and the helpers for
/// tests and tools above the domains.
const ABOVE: [&str; 5] = ["server", "pages", "app", "testing", "client"];

type Module = Vec<String>;

/// Every file of the library (the binaries and integration tests are not in it), by
/// its module path.
fn files(dir: &Path, found: &mut BTreeMap<Module, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        let rel = path.strip_prefix(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).unwrap().to_path_buf();
        if path.is_dir() && !["bin", "tests"].contains(&rel.to_str().unwrap()) {
            files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut module: Module = rel.with_extension("").iter().map(|s| s.to_str().unwrap().to_owned()).collect();
            if ["mod", "lib", "main"].contains(&module.last().unwrap().as_str()) {
                module.pop();
            }
            found.insert(module, path);
        }
    }
}

/// The source without comments and without its unit tests.
fn code(source: &str) -> String {
    let source = source.split("#[cfg(test)]\nmod tests").next().unwrap();
    source.lines().map(|line| line.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// A `use` tree (`a::{b, c::{d, e}}`) as the paths it names.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else { return vec![tree.to_owned()] };
    let (prefix, body) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap()]);
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).flat_map(expand).map(|p| format!("{prefix}{p}")).collect()
}

/// The paths a file names: its `use` trees, and `crate::`/`super::` paths in its code
/// (a renamed import's name after `@`).
fn paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for statement in code.split(';') {
        let keyword = statement.match_indices("use ").map(|(at, _)| at).find(|&at| {
            let before = statement[..at].trim_end();
            statement[..at].chars().next_back().is_none_or(char::is_whitespace)
                && (before.is_empty() || [")", "}", "]", "pub"].iter().any(|end| before.ends_with(end)))
        });
        if let Some(at) = keyword {
            let tree = statement[at + 4..].split_whitespace().collect::<Vec<_>>().join(" ");
            found.extend(expand(&tree.replace(" as ", "@").replace(' ', "")));
        }
    }
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for root in ["crate::", "super::"] {
        for (at, _) in code.match_indices(root) {
            let path: String = code[at..].chars().take_while(|&c| ident(c)).collect();
            if !code[..at].chars().next_back().is_some_and(ident) && !path.ends_with("::") {
                found.insert(path);
            }
        }
    }
    found
}

/// The file a path names: the longest prefix of it that is a file's module.
fn resolve(from: &Module, path: &str, modules: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut segments = path.split("::").filter(|s| !s.is_empty() && *s != "self" && *s != "*");
    let mut module: Module = match segments.next() {
        Some("crate") => Vec::new(),
        // A file's parent: `a/b.rs`'s is `a`, and `a/mod.rs`'s (module `a`) is the root.
        Some("super") if !from.is_empty() => from[..from.len() - 1].to_vec(),
        _ => return None,
    };
    for segment in segments {
        match segment {
            "super" => {
                module.pop();
            }
            named => module.push(named.split('@').next().unwrap_or(named).to_owned()),
        }
    }
    (1..=module.len()).rev().map(|n| module[..n].to_vec()).find(|m| modules.contains_key(m))
}

/// Every file's imports of other files.
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let mut modules = BTreeMap::new();
    files(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")), &mut modules);
    let mut edges = BTreeMap::new();
    for (module, path) in &modules {
        let code = code(&std::fs::read_to_string(path).unwrap());
        let to: BTreeSet<Module> =
            paths(&code).iter().filter_map(|p| resolve(module, p, &modules)).filter(|m| m != module).collect();
        edges.insert(module.clone(), to);
    }
    edges
}

/// What a file may import, by the top-level module it is in and the one it imports.
fn allowed(from: &str, to: &str) -> bool {
    let rank = |m: &str| DOMAINS.iter().position(|d| *d == m);
    if from == to || FOUNDATION.contains(&to) {
        return true;
    }
    if FOUNDATION.contains(&from) {
        return false;
    }
    match (rank(from), rank(to)) {
        (Some(_), _) if ABOVE.contains(&to) => false,
        (Some(f), Some(t)) => t < f && !(DOMAINS[f] == "live" && DOMAINS[t] == "worker"),
        _ => true,
    }
}

#[test]
fn dependencies_point_one_way() {
    let graph = graph();
    assert!(graph.len() > 100, "the library's files were found: {}", graph.len());
    let wrong: Vec<String> = graph
        .iter()
        .flat_map(|(from, to)| to.iter().map(move |to| (from, to)))
        .filter(|(from, to)| !from.is_empty() && !to.is_empty() && !allowed(&from[0], &to[0]))
        .map(|(from, to)| format!("{} -> {}", from.join("::"), to.join("::")))
        .collect();
    assert!(wrong.is_empty(), "imports against the rule: {wrong:#?}");
}

#[test]
fn no_two_files_import_each_other() {
    let graph = graph();
    // Depth first: a file met again while still on the path closes a circle.
    fn visit<'a>(
        at: &'a Module,
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        path: &mut Vec<&'a Module>,
        done: &mut BTreeSet<&'a Module>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| *m == at) {
            return Some(path[start..].iter().chain([&at]).map(|m| m.join("::")).collect());
        }
        if !done.insert(at) {
            return None;
        }
        path.push(at);
        let circle = graph[at].iter().find_map(|next| visit(next, graph, path, done));
        path.pop();
        circle
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(circle) = visit(module, &graph, &mut Vec::new(), &mut done) {
            panic!("files that import each other: {}", circle.join(" -> "));
        }
    }
}

#[test]
fn the_reader_finds_what_a_file_names() {
    let code =
        code("use super::{a::{b, c as d}, e};\npub(crate) use crate::f::g;\n// crate::comment\nlet x = crate::h::I;");
    let expected = ["crate::f::g", "crate::h::I", "super::a::b", "super::a::c@d", "super::e"];
    assert_eq!(paths(&code), expected.map(String::from).into());
    let modules: BTreeMap<Module, PathBuf> =
        [vec!["sale".into()], vec!["sale".into(), "gate".into()], vec!["bus".into()]]
            .map(|m| (m, PathBuf::new()))
            .into();
    let gate = vec!["sale".to_owned(), "gate".to_owned()];
    assert_eq!(resolve(&gate, "super::gate::grab", &modules), Some(gate.clone()));
    assert_eq!(resolve(&gate, "super::super::bus::SaleEvent", &modules), Some(vec!["bus".into()]));
    assert_eq!(resolve(&gate, "crate::bus::SaleEvent", &modules), Some(vec!["bus".into()]));
    assert_eq!(resolve(&vec!["sale".into()], "super::bus", &modules), Some(vec!["bus".into()]));
    assert_eq!(resolve(&gate, "super::view@card", &modules), Some(vec!["sale".into()]));
    assert!(allowed("sale", "orders") && !allowed("orders", "sale") && !allowed("bus", "sale"));
    assert!(!allowed("sale", "server") && !allowed("live", "worker") && allowed("server", "sale"));
    assert!(!allowed("auth", "server") && !allowed("sale", "server"), "no domain reaches up for the server's state");
}
