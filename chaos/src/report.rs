//! The chaos report: `report.md` (summary, checks, recovery table, event
//! parity, actors, memory), `report.json` (a versioned summary for `compare`, then everything),
//! `events.ndjson` (the merged timeline) and PNG plots.

use std::path::Path;

use meshmail_soak::checks::quantiles;
use meshmail_soak::plot;

use crate::runner::RunOutput;

const NETNS_KINDS: &[&str] = &["netns_partition", "netns_oneway", "netns_netem", "netns_bandwidth"];

fn recovery_values(o: &RunOutput, kinds: &[&str]) -> Vec<f64> {
    o.recoveries
        .iter()
        .filter(|r| kinds.contains(&r.kind.as_str()))
        .filter_map(|r| r.seconds)
        .collect()
}

/// The recovery classes of the report's table: (label, recovery kinds).
const RECOVERY_ROWS: [(&str, &[&str]); 7] = [
    ("hard kill -> every shard served", &["kill"]),
    ("link drop / partition heal -> links up", &["link_drop", "partition"]),
    ("pause end -> every shard served", &["pause"]),
    ("namespace fault heal -> links up", NETNS_KINDS),
    ("CPU starvation end -> links up", &["starve"]),
    (
        "store fault heal -> every shard served",
        &["store_lock", "store_slow", "disk_full", "blob_readonly"],
    ),
    ("kill -> next 250 to every account (write gap)", &["write_gap"]),
];

/// Writes every report file into `dir`; returns the markdown.
pub fn write(o: &mut RunOutput, dir: &Path, events_ndjson: &str) -> anyhow::Result<String> {
    plot_recoveries(o, dir);
    let s = &o.scenario;
    let mut md = format!(
        "# meshmail chaos report: {}\n\n{} nodes, {} s of faults (time_scale {}), seed {}; network: {}\n\n## End checks\n\n```\n",
        s.name, s.nodes, s.duration_s, s.time_scale, o.seed, o.network
    );
    for c in &o.checks {
        md.push_str(&c.line());
        md.push('\n');
    }
    md.push_str("```\n\n");
    if let Some(f) = &o.outbound {
        md.push_str(&outbound_section(f));
    }
    md.push_str(&recovery_section(o));
    md.push_str(&parity_section(o));
    md.push_str(&golden_section(o));
    md.push_str(&actors_and_memory_section(o));
    md.push_str(&notes_section(o));
    md.push_str(&format!(
        "\n## Faults\n\n{} actions; the full timeline (runner actions and every node's mesh events) is in events.ndjson.\n",
        o.actions.len()
    ));
    md.push_str(&schedule_section(o));
    std::fs::write(dir.join("report.md"), &md)?;
    let summary = crate::summary::Summary::of(o);
    let file = crate::summary::ReportFile {
        schema_version: crate::summary::SCHEMA_VERSION,
        summary: &summary,
        run: o,
    };
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&file)?)?;
    std::fs::write(dir.join("events.ndjson"), events_ndjson)?;
    Ok(md)
}

/// The kill and soft-fault recovery histograms (a note when plotting fails).
fn plot_recoveries(o: &mut RunOutput, dir: &Path) {
    let hard = recovery_values(o, &["kill"]);
    let soft = recovery_values(o, &["link_drop", "partition"]);
    o.plot_notes.extend(plot::try_plot("kill recovery", || {
        plot::histogram(
            &dir.join("recovery-kill.png"),
            "hard kill -> every shard served again",
            "seconds",
            &hard,
            30,
        )
    }));
    o.plot_notes.extend(plot::try_plot("soft recovery", || {
        plot::histogram(
            &dir.join("recovery-soft.png"),
            "link drop / partition heal -> links up",
            "seconds",
            &soft,
            30,
        )
    }));
}

fn recovery_section(o: &RunOutput) -> String {
    let mut md = String::from(
        "## Recovery times (seconds)\n\n| what | n | p50 | p90 | p99 | max | not recovered |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (name, kinds) in RECOVERY_ROWS {
        let v = recovery_values(o, kinds);
        let q = quantiles(&v);
        let missing = o
            .recoveries
            .iter()
            .filter(|r| kinds.contains(&r.kind.as_str()) && r.seconds.is_none())
            .count();
        md.push_str(&format!(
            "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {missing} |\n",
            v.len(),
            q[0],
            q[1],
            q[2],
            q[3]
        ));
    }
    let unmeasurable: Vec<&str> = o
        .recoveries
        .iter()
        .filter(|r| !r.note.is_empty())
        .map(|r| r.note.as_str())
        .collect();
    if let Some(n) = unmeasurable.first() {
        md.push_str(&format!("\n{} recoveries unmeasurable: {n}\n", unmeasurable.len()));
    }
    md.push_str("\n![kill recovery](recovery-kill.png)\n\n![soft recovery](recovery-soft.png)\n\n");
    md
}

fn parity_section(o: &RunOutput) -> String {
    let mut md = String::from(
        "## Event parity (per observer incarnation)\n\n| observer | gen | up | down | orphaned down | duplicate down | up before predecessor down | stale at end |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in &o.end.parity.observers {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            p.observer,
            p.observer_generation,
            p.ups,
            p.downs,
            p.orphaned_downs,
            p.duplicate_downs,
            p.up_before_predecessor_down,
            p.stale_at_end
        ));
    }
    md
}

fn golden_section(o: &RunOutput) -> String {
    let g = &o.end.golden;
    let h = &o.end.history;
    format!(
        "\n## Golden invariant\n\nacked {}, found {}, lost {}, duplicated {}, extra after a client error {}, extra never sent {}, misdelivered {}; `meshmail verify ledger` exit {}\n\n\
         UID/MODSEQ history: {} observations, uid_reused {}, modseq_regressions {}, uid_order_violations {}\n\n",
        g.acked,
        g.found,
        g.lost,
        g.duplicated,
        g.extra_after_error,
        g.extra_unexplained,
        g.misdelivered,
        o.end.ledger_exit,
        h.observations,
        h.uid_reused,
        h.modseq_regressions,
        h.uid_order_violations
    )
}

fn actors_and_memory_section(o: &RunOutput) -> String {
    let mut md = String::from(
        "## Actors at the quiet points (total − sessions − shards)\n\n| node | gen | start | end |\n|---|---:|---:|---:|\n",
    );
    for e in &o.end.actors_end {
        let start = o.end.actors_start.iter().find(|s| s.node == e.node);
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            e.node,
            e.generation,
            start.map(|s| s.fixed.to_string()).unwrap_or_else(|| "-".into()),
            e.fixed
        ));
    }
    md.push_str("\n## Memory\n\n| node | second-half RSS trend (% of mean) |\n|---|---:|\n");
    for (n, t) in &o.end.memory_trend_pct {
        md.push_str(&format!(
            "| {n} | {} |\n",
            t.map(|t| format!("{t:+.2}")).unwrap_or_else(|| "n/a".into())
        ));
    }
    let m = &o.memory;
    md.push_str(&format!(
        "\nPeak RSS {:.1} MiB, mean {:.1} MiB; {} node incarnations sampled, each one's peak RSS: median {:.1} MiB, largest {:.1} MiB.\n",
        m.peak_rss_mib, m.mean_rss_mib, m.incarnations, m.incarnation_peak_rss_mib_p50, m.incarnation_peak_rss_mib_max
    ));
    md.push_str("\n![RSS](memory.png)\n\n![fds](fds.png)\n\n![rate](rate.png)\n\n## Load\n\n");
    if let Some(l) = &o.end.load {
        md.push_str(&l.markdown());
    }
    md
}

fn notes_section(o: &RunOutput) -> String {
    let notes: Vec<&String> = o
        .plot_notes
        .iter()
        .chain(&o.end.actor_notes)
        .chain(&o.end.golden.examples)
        .chain(&o.end.history.examples)
        .chain(&o.end.parity.examples)
        .collect();
    if notes.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n## Findings and notes\n\n");
    for n in notes {
        md.push_str(&format!("- {n}\n"));
    }
    md
}

fn outbound_section(f: &crate::outbound::OutboundFindings) -> String {
    let mut md = String::from("## Outbound (remote recipients through the sink MX)\n\n");
    md.push_str(&format!(
        "| submitted | acked (250) | not acked | sink transactions | lost | duplicates | claim overlaps | untraced | delivering nodes | sink connections (peak open) | sink 451s | drained after |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
         | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} |\n\n",
        f.submitted,
        f.acked,
        f.not_acked,
        f.deliveries,
        f.lost,
        f.duplicates,
        f.overlaps.len(),
        f.untraced,
        f.distinct_nodes_delivering,
        f.sink_connections,
        f.sink_connections_peak,
        f.sink_tempfails,
        f.drain_s.map_or("not within the limit".to_string(), |s| format!("{s:.1} s")),
    ));
    if !f.lost_ids.is_empty() {
        md.push_str(&format!(
            "Lost (first {}): {}\n\n",
            f.lost_ids.len(),
            f.lost_ids.join(", ")
        ));
    }
    for o in f.overlaps.iter().take(10) {
        md.push_str(&format!(
            "- overlap: {} to {}: {}#{} epoch {} claimed at {} (delivered {}) and {}#{} epoch {} claimed at {} (delivered {})\n",
            o.id,
            o.rcpt,
            o.a.node,
            o.a.generation,
            o.a.epoch,
            o.a.started_ms,
            o.a_end_ms,
            o.b.node,
            o.b.generation,
            o.b.epoch,
            o.b.started_ms,
            o.b_end_ms
        ));
    }
    md.push('\n');
    md
}

/// The planned schedule (seed → plan; `--seed` reproduces it), capped at
/// 200 rows here; report.json has all of it.
fn schedule_section(o: &RunOutput) -> String {
    let mut md = format!(
        "\n## Schedule (seed {}, {} planned; reproduce with `--seed {}`)\n\n| t (s into faults) | fault | node | length s | from |\n|---:|---|---|---:|---|\n",
        o.seed,
        o.schedule.len(),
        o.seed
    );
    for p in o.schedule.iter().take(200) {
        let node = p
            .node
            .map_or_else(|| format!("random #{}", p.pick % 1000), |i| format!("node-{i}"));
        md.push_str(&format!(
            "| {:.2} | {} | {node} | {:.2} | {} |\n",
            p.t_s,
            p.kind.name(),
            p.duration_s,
            p.source
        ));
    }
    md
}
