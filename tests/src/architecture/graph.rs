//! Circles in the import graph: each folder's modules, their strongly connected components
//! (Tarjan), and one shortest way round each, with the import behind every step.
//!
//! Must never report a circle through a folder's own file (`mod.rs`): it declares its children
//! and they may use what it defines.

use super::{Cycle, ModPath, Target};
use std::collections::{BTreeMap, BTreeSet};

impl Target {
    /// The module an imported path lives in: its longest prefix that is a module.
    fn module_of(&self, to: &ModPath) -> ModPath {
        (0..=to.len())
            .rev()
            .map(|n| to[..n].to_vec())
            .find(|p| self.modules.contains(p))
            .unwrap_or_default()
    }

    /// Every circle: among each folder's modules (the crate root's are the top level). A
    /// folder's own file (`mod.rs`, or `x.rs` beside `x/`) is its front door and not a node:
    /// it declares its children and they may use what it defines.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut out = Vec::new();
        let folders: BTreeSet<ModPath> = self
            .modules
            .iter()
            .filter(|m| !m.is_empty())
            .map(|m| m[..m.len() - 1].to_vec())
            .collect();
        for folder in folders {
            let n = folder.len();
            // node → node → the first import that makes the edge
            let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
            for imp in &self.imports {
                let to = self.module_of(&imp.to);
                let under = |p: &ModPath| p.len() > n && p[..n] == folder[..];
                if !under(&imp.from) || !under(&to) || imp.from[n] == to[n] {
                    continue;
                }
                let what = format!("{} uses {} ({})", imp.from[n], imp.to.join("::"), imp.at);
                edges
                    .entry(imp.from[n].clone())
                    .or_default()
                    .entry(to[n].clone())
                    .or_insert(what);
            }
            for scc in strongly_connected(&edges) {
                out.push(self.cycle_in(&folder, &scc, &edges));
            }
        }
        out
    }

    fn cycle_in(
        &self,
        folder: &ModPath,
        scc: &BTreeSet<String>,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Cycle {
        // A shortest way round from the first member back to itself, inside the component.
        let start = scc.iter().next().cloned().unwrap_or_default();
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        'search: while let Some(node) = queue.pop_front() {
            for next in edges.get(&node).into_iter().flat_map(|e| e.keys()) {
                if !scc.contains(next) || prev.contains_key(next) {
                    continue;
                }
                prev.insert(next.clone(), node.clone());
                if *next == start {
                    break 'search;
                }
                queue.push_back(next.clone());
            }
        }
        let mut members = vec![start.clone()];
        let mut at = start.clone();
        while let Some(p) = prev.get(&at) {
            members.push(p.clone());
            if *p == start {
                break;
            }
            at = p.clone();
        }
        members.reverse();
        let steps = members
            .windows(2)
            .map(|w| edges[&w[0]][&w[1]].clone())
            .collect();
        Cycle {
            target: self.name.clone(),
            folder: folder.join("/"),
            members,
            component: scc.clone(),
            steps,
        }
    }
}

/// Tarjan's components with more than one node.
pub fn strongly_connected(
    edges: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let lw = s.low[w.as_str()];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on_stack.contains(w.as_str()) {
                let iw = s.index[w.as_str()];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}
