//! The job's main thread as an icicle: a flame graph with the root at the top and callees below,
//! drawn here as SVG with presentation attributes (the browser and the PNG draw the same), each
//! rectangle a frame (a function at a line) as wide as its share of the samples, in the colour
//! of the state most of its samples were in. Hover text is each rectangle's `<title>`: no script.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use gpulse_diagnose::Run;
use gpulse_diagnose::main_thread::{self, ThreadState};
use gpulse_model::{Gil, KernelState, PyFrame, Stacks};

use super::esc;

/// The picture's width, as every chart's.
const W: f64 = super::chart::W;
/// The icicle's left and right edges.
const X0: f64 = 2.0;
const X1: f64 = W - 2.0;
/// The legend's row above the icicle.
const TOP: f64 = 22.0;
const ROW_H: f64 = 17.0;
/// Rows at most, the root's included: deeper frames are counted in their ancestor on the last row.
pub const MAX_ROWS: usize = 40;
/// Narrower rectangles are not drawn; a frame's narrow callees are drawn as one where together
/// they are wide enough.
pub const MIN_W: f64 = 0.5;
/// Rectangles at most: the widest are kept (a frame is never narrower than its callees, so no
/// rectangle is kept without its caller).
pub const MAX_RECTS: usize = 3000;
/// About 6 px a character at 10 px, as the charts reckon.
const CHAR_W: f64 = 6.0;

/// A state's colour, and the colour its labels read in.
pub fn color(state: ThreadState) -> (&'static str, &'static str) {
    match state {
        ThreadState::Python => ("#4a7fc1", "#ffffff"),
        ThreadState::Native => ("#2f5d8f", "#ffffff"),
        ThreadState::CoreWait => ("#c2185b", "#ffffff"),
        ThreadState::GpuSync => ("#3a9d4a", "#ffffff"),
        ThreadState::GilWait => ("#d43d3d", "#ffffff"),
        ThreadState::Sleep => ("#8c8c8c", "#ffffff"),
        ThreadState::Network => ("#8e63b8", "#ffffff"),
        ThreadState::Disk => ("#8c5a3c", "#ffffff"),
        ThreadState::Ipc => ("#f08c2e", "#111111"),
        ThreadState::Lock => ("#e6c619", "#111111"),
        ThreadState::PeerWait => ("#17a2a2", "#ffffff"),
        ThreadState::Other => ("#d4d4d4", "#111111"),
    }
}

/// Samples per state, in [`ThreadState::ALL`]'s order.
type Counts = [u64; ThreadState::ALL.len()];

fn index(state: ThreadState) -> usize {
    ThreadState::ALL.iter().position(|s| *s == state).unwrap_or(ThreadState::ALL.len() - 1)
}

fn total(c: &Counts) -> u64 {
    c.iter().sum()
}

/// The state with most samples (the first in [`ThreadState::ALL`] on a tie).
fn majority(c: &Counts) -> ThreadState {
    let mut best = 0;
    for (i, n) in c.iter().enumerate() {
        if *n > c[best] {
            best = i;
        }
    }
    ThreadState::ALL[best]
}

/// A frame on one path from the root, with the samples under it.
struct Node {
    /// `None` for the root.
    frame: Option<u32>,
    counts: Counts,
    /// Frame id → node.
    children: BTreeMap<u32, usize>,
}

/// The samples of one process merged by path, at most [`MAX_ROWS`] deep.
struct Tree {
    nodes: Vec<Node>,
    /// Whether a stack went deeper than the rows drawn.
    cut: bool,
}

impl Tree {
    fn new(stacks: &Stacks, pid: u32) -> Self {
        // Samples per stack and state first: a stack is walked once, however often sampled.
        // A sample's state depends on its stack, what the kernel said and who held the GIL: each
        // such case is classified once (a day at 50 Hz is millions of samples, of far fewer cases).
        let mut seen: HashMap<(u32, &KernelState, Gil), usize> = HashMap::new();
        let mut by_stack: BTreeMap<u32, Counts> = BTreeMap::new();
        for s in stacks.samples.iter().filter(|s| s.pid == pid) {
            let state = *seen
                .entry((s.stack, &s.kernel, s.gil))
                .or_insert_with(|| index(main_thread::classify(stacks, s).state));
            by_stack.entry(s.stack).or_insert([0; ThreadState::ALL.len()])[state] += 1;
        }
        let root = Node { frame: None, counts: [0; ThreadState::ALL.len()], children: BTreeMap::new() };
        let mut t = Tree { nodes: vec![root], cut: false };
        for (stack, counts) in by_stack {
            // Frames the recording does not name are skipped, as `frames_of` does.
            let path: Vec<u32> = stacks
                .stacks
                .get(stack as usize)
                .into_iter()
                .flatten()
                .copied()
                .filter(|f| stacks.frames.get(*f as usize).is_some())
                .collect();
            t.cut |= path.len() >= MAX_ROWS;
            let mut at = 0;
            add(&mut t.nodes[at].counts, &counts);
            for f in path.into_iter().take(MAX_ROWS - 1) {
                at = match t.nodes[at].children.get(&f) {
                    Some(c) => *c,
                    None => {
                        let id = t.nodes.len();
                        t.nodes.push(Node {
                            frame: Some(f),
                            counts: [0; ThreadState::ALL.len()],
                            children: BTreeMap::new(),
                        });
                        t.nodes[at].children.insert(f, id);
                        id
                    }
                };
                add(&mut t.nodes[at].counts, &counts);
            }
        }
        t
    }
}

fn add(to: &mut Counts, c: &Counts) {
    to.iter_mut().zip(c).for_each(|(a, b)| *a += b);
}

/// One rectangle to draw: a node, or a frame's narrow callees together.
struct Rect {
    depth: usize,
    x: f64,
    w: f64,
    node: Option<usize>,
    /// For callees drawn together: how many, and their samples by state.
    group: Option<(usize, Counts)>,
}

/// Every rectangle at least [`MIN_W`] wide, at most [`MAX_RECTS`] of them, and whether some
/// were left out for the bound.
fn rects(t: &Tree, stacks: &Stacks) -> (Vec<Rect>, bool) {
    let all = total(&t.nodes[0].counts).max(1) as f64;
    let px = |n: u64| (X1 - X0) * n as f64 / all;
    let mut out = vec![Rect { depth: 0, x: X0, w: X1 - X0, node: Some(0), group: None }];
    let mut todo = vec![(0usize, 0usize, X0)];
    while let Some((node, depth, x0)) = todo.pop() {
        // The widest callees first, so the narrow ones end the row together.
        let mut kids: Vec<usize> = t.nodes[node].children.values().copied().collect();
        let name = |i: usize| t.nodes[i].frame.and_then(|f| stacks.frames.get(f as usize)).map(|f| &f.function);
        kids.sort_by(|a, b| {
            let (na, nb) = (total(&t.nodes[*a].counts), total(&t.nodes[*b].counts));
            nb.cmp(&na).then_with(|| name(*a).cmp(&name(*b))).then(t.nodes[*a].frame.cmp(&t.nodes[*b].frame))
        });
        let mut x = x0;
        let mut narrow: Option<(usize, Counts, f64)> = None;
        for k in kids {
            let w = px(total(&t.nodes[k].counts));
            if w >= MIN_W {
                out.push(Rect { depth: depth + 1, x, w, node: Some(k), group: None });
                todo.push((k, depth + 1, x));
            } else {
                let g = narrow.get_or_insert((0, [0; ThreadState::ALL.len()], x));
                g.0 += 1;
                add(&mut g.1, &t.nodes[k].counts);
            }
            x += w;
        }
        if let Some((n, counts, gx)) = narrow {
            let w = px(total(&counts));
            if w >= MIN_W {
                out.push(Rect { depth: depth + 1, x: gx, w, node: None, group: Some((n, counts)) });
            }
        }
    }
    let over = out.len() > MAX_RECTS;
    if over {
        // Stable: on equal widths the caller (shallower) stays before its callee.
        out.sort_by(|a, b| b.w.total_cmp(&a.w).then(a.depth.cmp(&b.depth)));
        out.truncate(MAX_RECTS);
    }
    (out, over)
}

/// Text from the job's memory, safe in an SVG or HTML text or attribute: escaped, control
/// characters (which XML refuses) as spaces.
fn text(s: &str) -> String {
    esc(&s.replace(|c: char| c.is_control(), " "))
}

/// `s` cut to `n` characters, an ellipsis marking the cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn pct(n: u64, of: u64) -> String {
    format!("{:.1}%", 100.0 * n as f64 / of.max(1) as f64)
}

/// The states sampled, with their samples, most first.
fn by_count(c: &Counts) -> Vec<(ThreadState, u64)> {
    let mut v: Vec<(ThreadState, u64)> =
        ThreadState::ALL.iter().map(|s| (*s, c[index(*s)])).filter(|x| x.1 > 0).collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    v
}

/// "sleep 60.0%, python 40.0%": the states under a rectangle, most first.
fn states_line(c: &Counts) -> String {
    let v = by_count(c);
    let all = total(c);
    v.iter().map(|(s, n)| format!("{} {}", s.as_str(), pct(*n, all))).collect::<Vec<_>>().join(", ")
}

/// `function file.py:LINE`, the function first so that a cut label still names it; the line
/// tells apart a function's calls from different lines.
fn label(f: &PyFrame) -> String {
    let file = f.file.rsplit('/').next().unwrap_or(&f.file);
    match f.line {
        0 => format!("{} {file}", f.function),
        line => format!("{} {file}:{line}", f.function),
    }
}

/// `file:LINE function`, and the code line under it where the sampler read one: escaped.
fn frame_title(f: &PyFrame) -> String {
    let mut s = text(&format!("{}:{} {}", f.file, f.line, f.function));
    let code = f.code.as_deref().unwrap_or("").replace(|c: char| c.is_control(), " ");
    if !code.trim().is_empty() {
        s += "\n";
        s += &text(code.trim());
    }
    s
}

/// The icicle of process `pid`'s main thread, and whether a stack was deeper than the rows drawn;
/// `None` when it has no sample.
pub fn svg(stacks: &Stacks, pid: u32) -> Option<(String, bool)> {
    let tree = Tree::new(stacks, pid);
    let all = total(&tree.nodes[0].counts);
    if all == 0 {
        return None;
    }
    let (rects, over) = rects(&tree, stacks);
    let rows = rects.iter().map(|r| r.depth + 1).max().unwrap_or(1);
    let h = TOP + rows as f64 * ROW_H + 4.0;
    let mut s = format!(
        r##"<svg class="icicle" data-pid="{pid}" data-samples="{all}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="10" role="img"><title>The main thread of PID {pid}: {all} samples</title>"##
    );
    s += &legend(&tree.nodes[0].counts);
    for r in &rects {
        let counts = match (r.node, &r.group) {
            (Some(n), _) => tree.nodes[n].counts,
            (None, Some((_, c))) => *c,
            (None, None) => continue,
        };
        let n = total(&counts);
        let state = majority(&counts);
        let (fill, ink) = color(state);
        let frame = r.node.and_then(|i| tree.nodes[i].frame).and_then(|f| stacks.frames.get(f as usize));
        let (label, title) = match (r.node, frame, &r.group) {
            (Some(0), _, _) => (format!("main thread, PID {pid}"), format!("the main thread of PID {pid}")),
            (_, Some(f), _) => (label(f), frame_title(f)),
            (_, _, Some((k, _))) => ("…".to_owned(), format!("{k} callees, each too narrow to draw")),
            _ => continue,
        };
        let y = TOP + r.depth as f64 * ROW_H;
        let _ = write!(
            s,
            r##"<g class="frame" data-state="{}"><rect x="{:.2}" y="{y:.1}" width="{:.2}" height="{:.1}" fill="{fill}" stroke="#ffffff" stroke-width="0.5"/>"##,
            state.as_str(),
            r.x,
            r.w,
            ROW_H - 1.0,
        );
        let fits = ((r.w - 6.0) / CHAR_W).floor();
        if fits >= 3.0 {
            let _ = write!(
                s,
                r#"<text x="{:.2}" y="{:.1}" fill="{ink}">{}</text>"#,
                r.x + 3.0,
                y + ROW_H - 5.0,
                text(&clip(&label, fits as usize))
            );
        }
        let _ = write!(
            s,
            "<title>{title}\n{n} samples, {} of the thread: {}</title></g>",
            pct(n, all),
            states_line(&counts)
        );
    }
    if over {
        // Said in the picture too, so the PNG does not pass a cut icicle for a whole one.
        let _ = write!(
            s,
            r##"<text x="{X1}" y="{:.1}" text-anchor="end" fill="#555">the widest {MAX_RECTS} frames</text>"##,
            h - 1.0
        );
    }
    Some((s + "</svg>", tree.cut))
}

/// Each state sampled, with its colour and share of the samples, most first, on the top row.
fn legend(c: &Counts) -> String {
    let all = total(c);
    let v = by_count(c);
    let mut s = String::from(r#"<g class="legend">"#);
    let mut x = X0;
    for (state, n) in v {
        let label = format!("{} {}", state.as_str(), pct(n, all));
        let _ = write!(
            s,
            r##"<g class="legend-item" data-state="{}"><rect x="{x:.1}" y="5" width="10" height="10" fill="{}"/><text x="{:.1}" y="14" fill="#333">{label}</text><title>{}: {} of the samples</title></g>"##,
            state.as_str(),
            color(state).0,
            x + 14.0,
            state.words(),
            pct(n, all)
        );
        x += 14.0 + CHAR_W * label.chars().count() as f64 + 14.0;
    }
    s + "</g>"
}

/// The process drawn: the first profile sampled (the main process the ledger reads), else the
/// first process with a sample.
fn pid_drawn(run: &Run, profiles: &[main_thread::Profile]) -> Option<u32> {
    profiles
        .iter()
        .find(|p| p.refused.is_none() && p.samples > 0)
        .map(|p| p.pid)
        .or_else(|| run.stacks.samples.first().map(|s| s.pid))
}

/// The report's "Main thread" section: its notes (what is drawn, and a line for each process that
/// could not be sampled) and the icicle; `None` when nothing was sampled or refused. `profiles`
/// are the run's, as its analysis holds them.
pub fn section(run: &Run, profiles: &[main_thread::Profile]) -> Option<(Vec<String>, Vec<String>)> {
    let st = &run.stacks;
    if st.samples.is_empty() && st.refusals.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    let mut charts = Vec::new();
    if let Some(pid) = pid_drawn(run, profiles)
        && let Some((svg, cut)) = svg(st, pid)
    {
        let p = profiles.iter().find(|p| p.pid == pid);
        let role = st.process(pid).map_or("", |p| p.role.as_str());
        let n = st.samples.iter().filter(|s| s.pid == pid).count();
        let rate = p.filter(|p| p.rate_hz > 0.0).map_or(String::new(), |p| format!(" at {:.0} Hz", p.rate_hz));
        let mut line = format!(
            "PID {pid}{}: {n} samples{rate}. Each rectangle is a function at a line, under its caller, as wide as its share of the samples and coloured by the state most of them were in; hover for the site.",
            if role.is_empty() { String::new() } else { format!(" ({role})") }
        );
        if cut {
            line += &format!(" Stacks deeper than {MAX_ROWS} rows are counted in their frame on the last row.");
        }
        lines.push(line);
        charts.push(svg);
    }
    for p in profiles.iter().filter(|p| p.refused.is_some()) {
        lines.push(format!("PID {} could not be sampled: {}", p.pid, p.refused.as_deref().unwrap_or("")));
    }
    Some((lines, charts))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gpulse_model::{Gil, KernelState, ProcessRole, SampledProcess, ThreadSample};

    use super::*;
    use crate::Analysis;

    const HOSTILE: &str = "<script>alert(1)</script>";

    fn frame(function: &str, line: u32) -> PyFrame {
        PyFrame { file: "/w/train.py".into(), line, function: function.into(), code: None }
    }

    fn sleeping() -> KernelState {
        KernelState { state: 'S', syscall: Some(230), wchan: Some("hrtimer_nanosleep".into()), across: false }
    }

    fn running() -> KernelState {
        KernelState { state: 'R', syscall: None, wchan: None, across: false }
    }

    /// A main process `pid` sampled every 20 ms, in the order given: (stack, kernel, GIL).
    fn stacks(frames: Vec<PyFrame>, paths: Vec<Vec<u32>>, samples: &[(u32, KernelState, Gil)]) -> Stacks {
        let pid = 7;
        Stacks {
            frames,
            stacks: paths,
            processes: vec![SampledProcess {
                gil_read: None,
                pid,
                role: ProcessRole::Main,
                python: "3.11.7".into(),
                command: "python train.py".into(),
                rank: None,
            }],
            samples: samples
                .iter()
                .enumerate()
                .map(|(i, (stack, kernel, gil))| ThreadSample {
                    clock: None,
                    t_us: 20_000 * i as i64,
                    pid,
                    stack: *stack,
                    kernel: kernel.clone(),
                    gil: *gil,
                })
                .collect(),
            rate_hz: vec![(pid, 50.0)],
            refusals: Vec::new(),
        }
    }

    /// 60 samples asleep in a → b → c (c named to break out of the page), 40 running Python in
    /// a → d, interleaved.
    fn sixty_forty() -> Stacks {
        let mut c = frame(HOSTILE, 30);
        c.code = Some("time.sleep(0.1)  # </title><script>x()</script>\u{1}".into());
        let frames = vec![frame("a", 10), frame("b", 20), c, frame("d", 40)];
        let samples: Vec<(u32, KernelState, Gil)> =
            (0..100).map(|i| if i % 5 < 3 { (0, sleeping(), Gil::Free) } else { (1, running(), Gil::Held) }).collect();
        stacks(frames, vec![vec![0, 1, 2], vec![0, 3]], &samples)
    }

    fn render(st: Stacks) -> String {
        let run = Run { stacks: Arc::new(st), ..Run::default() };
        super::super::render(
            "x.db",
            &Analysis { diagnosis: gpulse_diagnose::Diagnosis::of(&run), run, ..Analysis::default() },
        )
    }

    /// A drawn rectangle: its state, x, y, width, fill and title.
    #[derive(Debug)]
    struct Drawn {
        state: String,
        x: f64,
        y: f64,
        w: f64,
        fill: String,
        title: String,
    }

    fn attr<'a>(s: &'a str, key: &str) -> &'a str {
        let k = format!(" {key}=\"");
        let rest = &s[s.find(&k).unwrap_or_else(|| panic!("{key} in {s}")) + k.len()..];
        &rest[..rest.find('"').unwrap()]
    }

    fn drawn(html: &str) -> Vec<Drawn> {
        let svg = &html[html.find("<svg class=\"icicle\"").expect("an icicle")..];
        let svg = &svg[..svg.find("</svg>").unwrap()];
        svg.split("<g class=\"frame\"")
            .skip(1)
            .map(|g| {
                let g = &g[..g.find("</g>").unwrap()];
                let t = &g[g.find("<title>").unwrap() + 7..g.find("</title>").unwrap()];
                Drawn {
                    state: attr(g, "data-state").to_owned(),
                    x: attr(g, "x").parse().unwrap(),
                    y: attr(g, "y").parse().unwrap(),
                    w: attr(g, "width").parse().unwrap(),
                    fill: attr(g, "fill").to_owned(),
                    title: t.to_owned(),
                }
            })
            .collect()
    }

    fn find<'a>(d: &'a [Drawn], site: &str) -> &'a Drawn {
        d.iter().find(|r| r.title.starts_with(site)).unwrap_or_else(|| panic!("{site} drawn: {d:#?}"))
    }

    #[test]
    fn widths_follow_the_samples_and_colours_the_states_under_them() {
        let html = render(sixty_forty());
        let d = drawn(&html);
        assert_eq!(d.len(), 5, "the root, a, b, c and d: {d:#?}");
        let (root, a, b, c, dd) = (
            &d[0],
            find(&d, "/w/train.py:10 a"),
            find(&d, "/w/train.py:20 b"),
            find(&d, "/w/train.py:30 &lt;script&gt;"),
            find(&d, "/w/train.py:40 d"),
        );
        assert!(root.title.starts_with("the main thread of PID 7\n100 samples"), "{}", root.title);
        assert!((root.w - (X1 - X0)).abs() < 1e-9 && (a.w - root.w).abs() < 0.01, "a is under every sample");
        assert!((b.w / dd.w - 1.5).abs() < 1e-3, "60:40, drawn {} and {}", b.w, dd.w);
        assert!((b.w - 0.6 * root.w).abs() < 0.01);
        assert!((c.w - b.w).abs() < 1e-9 && c.x == b.x && c.y > b.y && b.y > a.y && a.y > root.y, "c under b");
        assert!(dd.x >= b.x + b.w - 0.01 && dd.y == b.y, "d beside b, on b's row");
        // Each rectangle in the colour of the state most of its samples were in.
        let (sleep, python) = (color(ThreadState::Sleep).0, color(ThreadState::Python).0);
        assert_ne!(sleep, python);
        for (r, state, fill) in [(b, "sleep", sleep), (c, "sleep", sleep), (dd, "python", python), (a, "sleep", sleep)]
        {
            assert_eq!((r.state.as_str(), r.fill.as_str()), (state, fill), "{}", r.title);
        }
        assert!(a.title.ends_with("100 samples, 100.0% of the thread: sleep 60.0%, python 40.0%"), "{}", a.title);
        assert!(dd.title.ends_with("40 samples, 40.0% of the thread: python 100.0%"), "{}", dd.title);
        // The legend: each state with its share.
        assert!(html.contains(">sleep 60.0%</text>") && html.contains(">python 40.0%</text>"), "{html}");
        // The job's strings stay text: escaped, and without the control characters XML refuses.
        assert!(!html.contains("<script") && !html.contains("</title>&lt;"), "{html}");
        assert!(c.title.contains("time.sleep(0.1)  # &lt;/title&gt;&lt;script&gt;x()&lt;/script&gt;\n"), "{}", c.title);
        assert!(!html.contains('\u{1}'));
        // The section comes after the ledger's place, before the loop and the GPUs.
        let at = html.find("<h2>Main thread</h2>").expect("a section");
        assert!(html.find("<h2>Findings</h2>").unwrap() < at);
        assert!(html[at..].contains("PID 7 (main): 100 samples at 50 Hz."), "{html}");
    }

    #[test]
    fn a_label_is_the_function_cut_to_its_rectangle() {
        let name = "a_function_with_a_name_far_longer_than_its_narrow_rectangle";
        let frames = vec![frame("main", 1), frame(name, 2), frame("wide", 3)];
        let mut samples = vec![(0, running(), Gil::Held); 3];
        samples.extend(vec![(1, running(), Gil::Held); 97]);
        let html = render(stacks(frames, vec![vec![0, 1], vec![0, 2]], &samples));
        let svg = &html[html.find("<svg class=\"icicle\"").unwrap()..];
        let labels: Vec<&str> =
            svg.split("<text x=").skip(1).filter_map(|t| t.split('>').nth(1)?.split('<').next()).collect();
        // 3% of 896 px: about 27 px, room for 3 characters at 6 px.
        assert!(labels.contains(&"a_…"), "{labels:?}");
        assert!(labels.contains(&"wide train.py:3") && labels.contains(&"main thread, PID 7"), "{labels:?}");
        assert!(!labels.iter().any(|l| l.contains("far_longer")), "{labels:?}");
    }

    #[test]
    fn no_samples_no_section_and_a_refusal_says_why() {
        assert!(!render(Stacks::default()).contains("Main thread"));
        let refused = Stacks {
            refusals: vec![(42, "ptrace refused: set kernel.yama.ptrace_scope=0 or add CAP_SYS_PTRACE".into())],
            ..Stacks::default()
        };
        let html = render(refused);
        assert!(html.contains("<h2>Main thread</h2><p>PID 42 could not be sampled: ptrace refused"), "{html}");
        assert!(!html.contains("class=\"icicle\""));
        // The picture for the PNG has it too, and a page without samples has neither.
        let run = Run { stacks: Arc::new(sixty_forty()), ..Run::default() };
        let (svg, areas) = super::super::composite_svg(
            "x.db",
            &Analysis { diagnosis: gpulse_diagnose::Diagnosis::of(&run), run, ..Analysis::default() },
        );
        assert!(svg.contains("<svg class=\"icicle\"") && svg.contains(">Main thread</text>") && areas.is_empty());
        let (svg, _) = super::super::composite_svg("x.db", &Analysis::default());
        assert!(!svg.contains("icicle"));
    }

    #[test]
    fn narrow_callees_are_drawn_together() {
        // 1000 samples in a → b, and one each in 3000 other callees of a: each 0.22 px wide.
        let mut frames = vec![frame("a", 1), frame("b", 2)];
        frames.extend((0..3000).map(|i| frame(&format!("n{i}"), 3 + i)));
        let mut paths = vec![vec![0, 1]];
        paths.extend((0..3000).map(|i| vec![0, 2 + i]));
        let mut samples = vec![(0, running(), Gil::Held); 1000];
        samples.extend((0..3000).map(|i| (1 + i, sleeping(), Gil::Free)));
        let d = drawn(&render(stacks(frames, paths, &samples)));
        assert_eq!(d.len(), 4, "the root, a, b and the narrow callees: {d:#?}");
        let group = find(&d, "3000 callees, each too narrow to draw");
        assert!((group.w - 0.75 * (X1 - X0)).abs() < 0.01 && group.state == "sleep", "{group:?}");
        assert!((group.x - (find(&d, "/w/train.py:2 b").x + 0.25 * (X1 - X0))).abs() < 0.01, "right of b");
    }

    #[test]
    fn a_long_recording_stays_bounded() {
        // 1500 callees of a, each with one of its own, each one sample: 3002 rectangles of 0.6 px.
        let mut frames = vec![frame("a", 1)];
        frames.extend((0..3000).map(|i| frame(&format!("f{i}"), 2 + i)));
        let paths: Vec<Vec<u32>> = (0..1500).map(|i| vec![0, 1 + 2 * i, 2 + 2 * i]).collect();
        let samples: Vec<_> = (0..1500).map(|i| (i, running(), Gil::Held)).collect();
        let html = render(stacks(frames, paths, &samples));
        let d = drawn(&html);
        assert_eq!(d.len(), MAX_RECTS);
        assert!(d.iter().all(|r| r.w >= MIN_W));
        let row = |k: f64| d.iter().filter(|r| r.y == TOP + k * ROW_H).count();
        assert_eq!([row(0.0), row(1.0), row(2.0), row(3.0)], [1, 1, 1500, 1498], "callers kept before callees");
        assert!(html.contains(">the widest 3000 frames</text>"));
        // A stack 100 frames deep: 40 rows, the deeper frames counted on the last.
        let frames: Vec<PyFrame> = (0..100).map(|i| frame(&format!("f{i}"), i)).collect();
        let html = render(stacks(frames, vec![(0..100).collect()], &[(0, running(), Gil::Held)]));
        let d = drawn(&html);
        assert_eq!(d.len(), MAX_ROWS);
        assert_eq!(d.iter().map(|r| r.y).fold(0.0, f64::max), TOP + (MAX_ROWS - 1) as f64 * ROW_H);
        assert!(html.contains("deeper than 40 rows"));
    }

    /// resvg draws the rectangles in their colours, in the 60:40 ratio.
    #[cfg(feature = "png")]
    #[test]
    fn the_png_draws_the_icicle() {
        let run = Run { stacks: Arc::new(sixty_forty()), ..Run::default() };
        let (svg, _) = super::super::composite_svg(
            "x.db",
            &Analysis { diagnosis: gpulse_diagnose::Diagnosis::of(&run), run, ..Analysis::default() },
        );
        let count = |svg: &str, c: &str| {
            let png = crate::png::render(svg).unwrap();
            let (_, _, rgba) = crate::png::decode(&png.bytes).unwrap();
            let hex = |k: usize| u8::from_str_radix(&c[1 + k..3 + k], 16).unwrap();
            let c = [hex(0), hex(2), hex(4)];
            rgba.chunks(4).filter(|p| (0..3).all(|k| p[k] == c[k])).count() as f64
        };
        let (sleep, python) = (color(ThreadState::Sleep).0, color(ThreadState::Python).0);
        let (s, p) = (count(&svg, sleep), count(&svg, python));
        // Sleep fills the root and a (most of their samples slept), b and c: 100 + 100 + 60 + 60
        // against d's 40, less the labels' ink.
        assert!(p > 1000.0 && (s / p / 8.0 - 1.0).abs() < 0.05, "{s} {p}");
        let blank = svg.replace(&format!("fill=\"{sleep}\""), "fill=\"none\"");
        assert!(count(&blank, sleep) < 0.05 * s, "so the check can fail");
    }
}
