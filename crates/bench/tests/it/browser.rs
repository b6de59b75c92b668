//! The report as a real browser draws it: headless Chromium loads a copy of report.html with a
//! measuring script added (the report itself has no scripts), and the script reports every
//! text that a chart draws outside its own box (legends above all, whose widths the renderer
//! can only estimate), every chart whose plot area has another x range than the first chart's,
//! and the warm-up bands. Chromium is Debian's `chromium` (`/usr/bin/chromium`, or the path in
//! `EVENKEEL_CHROMIUM`); where it is not installed the test says so and passes, unless
//! `EVENKEEL_REQUIRE_BROWSER=1`, which makes a missing browser a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use evenkeel_bench::report::summary::Summary;
use evenkeel_bench::report::write_results;

/// Collects the layout problems into `<pre id="probe">` as JSON.
const PROBE: &str = r#"<script>
addEventListener('load', () => {
  const out = { charts: 0, problems: [], plots: [], bands: 0, legends: 0 };
  for (const svg of document.querySelectorAll('svg.chart')) {
    out.charts++;
    const title = svg.querySelector('title').textContent;
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
          r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        out.problems.push(title + ': "' + t.textContent + '" at ' +
          [r.left - box.left, r.right - box.left, r.top - box.top, r.bottom - box.top]
            .map(v => v.toFixed(1)).join(',') + ' outside ' + box.width + 'x' + box.height);
      }
    }
    const entries = [...svg.querySelectorAll('g.legend')].map(g => g.getBoundingClientRect());
    out.legends += entries.length;
    for (let i = 0; i < entries.length; i++) for (let j = i + 1; j < entries.length; j++) {
      const a = entries[i], b = entries[j];
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
        out.problems.push(title + ': legend entries ' + i + ' and ' + j + ' overlap');
    }
    const plot = svg.querySelector('rect.plot').getBoundingClientRect();
    out.plots.push([plot.left - box.left, plot.width]);
    out.bands += svg.querySelectorAll('rect.band').length;
  }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"#;

fn chromium() -> Option<PathBuf> {
    let p = std::env::var_os("EVENKEEL_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    p.is_file().then_some(p)
}

/// The DOM after load, as Chromium dumps it.
fn dump_dom(browser: &Path, page: &Path, profile: &Path) -> String {
    let child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start chromium");
    // A browser that hangs must not hang the suite: kill it after a minute.
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    let out = child.wait_with_output().expect("chromium output");
    let _ = tx.send(());
    let _ = watchdog.join();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn report_lays_out_in_headless_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("EVENKEEL_REQUIRE_BROWSER").is_none(),
            "EVENKEEL_REQUIRE_BROWSER is set but no chromium at /usr/bin/chromium or \
             EVENKEEL_CHROMIUM (apt-get install chromium)"
        );
        eprintln!("no chromium installed (apt-get install chromium): browser check not run");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = super::report::recorded();
    // A long schedule label near the right edge must stay inside the chart too.
    rows[57].event = Some("set adaptive_flushing=innodb80; set io_capacity=2000".into());
    let config = [
        ("evenkeel.checkpoint_async_point_pct", "88"),
        ("evenkeel.checkpoint_sync_point_pct", "94"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let s = Summary::from_rows("tpcc", "evenkeel", config, "New-Order", &rows);
    write_results(dir.path(), &s, &rows).expect("write results");
    let page = std::fs::read_to_string(dir.path().join("report.html")).expect("read report");
    let probe = dir.path().join("probe.html");
    std::fs::write(&probe, page.replace("</body>", &format!("{PROBE}</body>")))
        .expect("write probe page");
    let dom = dump_dom(&browser, &probe, &dir.path().join("profile"));
    let json = dom
        .split("<pre id=\"probe\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| panic!("the probe ran: {}", &dom[..dom.len().min(500)]))
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    let v: serde_json::Value = serde_json::from_str(&json).expect("probe JSON");
    // eleven, and the change buffer's (the rows have one)
    assert_eq!(v["charts"], 12, "{v}");
    assert_eq!(v["bands"], 12, "a warm-up band on every chart: {v}");
    assert!(v["legends"].as_u64().unwrap_or(0) >= 30, "{v}");
    let problems = v["problems"].as_array().expect("problems");
    assert!(problems.is_empty(), "drawn outside a chart: {problems:#?}");
    let plots = v["plots"].as_array().expect("plots");
    assert!(
        plots.windows(2).all(|w| w[0] == w[1]),
        "every plot area has the same x range: {plots:?}"
    );
}
