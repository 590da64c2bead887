"""Check the built book as a reader sees it, in headless Chromium, offline.

For every page of ``_build/html`` listed in the table of contents:

* math was typeset: MathJax output elements (``mjx-container``) are present in the rendered
  DOM for every math block of the source, and no raw ``$$`` is left in the text;
* every figure loaded: each ``<img>`` of the page was requested from the local server and
  answered 200, with a non-empty PNG;
* explorers work without a kernel: every cell tagged ``explorer`` shows its static player,
  no live widget view is left in the HTML, and moving a player's control changes the figure
  to a frame that loads (at both widths);
* no table and no code block is wider than its box at a desktop (1280 px) or a phone (390 px)
  width, and no figure is shown below ``MIN_SCALE`` of its drawn width at desktop width
  (measured in the page by a probe script the local server appends);
* a screenshot of the whole page (its measured height) is saved to
  ``_build/screenshots/<page>.png``.

Chromium is ``$CHROMIUM`` or the one on the PATH; when missing, Debian's ``chromium`` is
installed with apt (as root, or through password-less sudo; otherwise the check says what to
install). It runs with no network besides the local server (``--disable-background-networking``
and friends); its profile is a temporary folder, so any user can run the check.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-quic", "--hide-scrollbars"]


def chromium() -> str:
    """A headless-capable Chromium: ``$CHROMIUM``, else one on the PATH, else Debian's
    ``chromium`` installed with apt-get (as root directly; as a user through ``sudo -n``, which
    never waits for a password). A user who can do neither is told what to install."""
    env = os.environ.get("CHROMIUM")
    if env:
        if not (shutil.which(env) or Path(env).exists()):
            raise SystemExit(f"CHROMIUM={env!r} is not an executable")
        return shutil.which(env) or env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    if os.geteuid() == 0:
        sudo = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        sudo = ["sudo", "-n"]
    else:
        raise SystemExit("no Chromium found, and this user cannot install one (not root, no password-less "
                         "sudo): install Debian's chromium (apt-get install chromium) or point CHROMIUM at a "
                         "Chromium or Chrome executable, then rerun `make check-html`")
    print("chromium not found: installing Debian's chromium with apt-get ...", flush=True)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "chromium"], check=False, capture_output=True)
    if not shutil.which("chromium"):
        subprocess.run([*sudo, "apt-get", "update", "-q"], check=False, capture_output=True)
        subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "chromium"], check=True)
    if not shutil.which("chromium"):
        raise SystemExit("could not install chromium")
    return shutil.which("chromium")


# Measures, once the page has laid out, every table of the article that is wider than its
# column (text clipped behind a scrollbar) and the page's full height (for whole-page shots).
PROBE = b"""<script>
window.addEventListener("load", () => setTimeout(() => {
  const main = document.querySelector("main") || document.body;
  const width = main.getBoundingClientRect().width;
  const wide = [...main.querySelectorAll("table")].map((t, i) => {
    const box = t.parentElement.getBoundingClientRect();
    return [i, Math.round(t.scrollWidth - Math.min(box.width, width))];
  }).filter(([i, over]) => over > 2);
  // code blocks whose text runs past their box (hidden behind a scrollbar)
  const code = [...main.querySelectorAll("pre")].map((p, i) => [i, Math.round(p.scrollWidth - p.clientWidth)])
    .filter(([i, over]) => over > 2);
  // figures: shown width / drawn width (tick labels of a figure drawn at 100 dpi shrink with it)
  const scales = [...main.querySelectorAll("div.cell_output img, .icl-player img")]
    .filter(img => img.naturalWidth > 0)
    .map(img => Math.round(100 * img.getBoundingClientRect().width / img.naturalWidth) / 100);
  // each static player: move its first control to another value; the frame must change and load
  const players = [...document.querySelectorAll(".icl-player")].map(root => {
    const img = root.querySelector("img"), control = root.querySelector("[data-k]");
    const before = img.src;
    if (!control) return {moved: false, changed: false};
    if (control.tagName === "SELECT") control.selectedIndex = (control.selectedIndex + 1) % control.options.length;
    else control.value = String((+control.value + 1) % (+control.max + 1));
    control.dispatchEvent(new Event("input", {bubbles: true}));
    return {moved: true, changed: img.src !== before && img.src.startsWith("data:image/png"), img};
  });
  let done = false;
  const finish = () => {
    if (done) return;        // once: after the frames decode, or after 3 s if a decode never settles
    done = true;
    const out = document.createElement("div");
    out.id = "icl-probe";
    out.setAttribute("data-overflow", JSON.stringify(wide));
    out.setAttribute("data-code", JSON.stringify(code));
    out.setAttribute("data-scales", JSON.stringify(scales));
    out.setAttribute("data-players", JSON.stringify(players.map(p => [p.moved, p.changed,
      !!(p.img && p.img.complete && p.img.naturalWidth > 0)])));
    out.setAttribute("data-height", String(document.documentElement.scrollHeight));
    document.body.appendChild(out);
  };
  Promise.all(players.filter(p => p.img).map(p => p.img.decode().catch(() => null))).then(finish, finish);
  setTimeout(finish, 3000);
}, 500));
</script>"""
WIDTHS = {"desktop": 1280, "phone": 390}
MIN_SCALE = 0.6          # a figure drawn at 100 dpi with 10 pt labels keeps >= 8 px labels


class Server:
    """A local static server over _build/html that logs (path, status) of every request."""

    def __init__(self, root: Path):
        self.log: list[tuple[str, int]] = []
        log = self.log

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_request(self, code="-", size="-"):
                log.append((self.path.split("?")[0], int(code) if str(code).isdigit() else 0))

            def do_GET(self):
                path = self.path.split("?")[0]
                if "probe=1" not in self.path or not path.endswith(".html"):
                    return super().do_GET()
                # the page with the layout probe (PROBE) appended: the dumped DOM carries its result
                body = (root / path.lstrip("/")).read_bytes().replace(b"</body>", PROBE + b"</body>")
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


class Page(HTMLParser):
    """Collects images, math markers and visible text of a rendered DOM."""

    def __init__(self):
        super().__init__()
        self.imgs, self.mjx, self.text, self._skip = [], 0, [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and a.get("src"):
            self.imgs.append(a["src"])
        if tag == "mjx-container":
            self.mjx += 1
        if tag in ("script", "style", "mjx-assistive-mml"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style", "mjx-assistive-mml"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def pages() -> list[Path]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from book import toc_documents
    return [HTML / f"{doc}.html" for doc in toc_documents()]


def source_math_blocks(page: Path) -> int:
    src = ROOT / page.relative_to(HTML).with_suffix(".md")
    text = src.read_text() if src.exists() else ""
    return len(re.findall(r"\$\$", text)) // 2


def check_page(exe: str, server: Server, page: Path) -> list[str]:
    url_path = "/" + page.relative_to(HTML).as_posix()
    url = f"http://127.0.0.1:{server.port}{url_path}"
    start = len(server.log)
    layout_problems, height, dom, requests, stats = [], 9000, "", {}, {"scales": [], "players": 0}
    for name, width in WIDTHS.items():
        with tempfile.TemporaryDirectory() as profile:
            probed = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000",
                                     f"--window-size={width},900", "--dump-dom", url + "?probe=1"],
                                    capture_output=True, text=True, timeout=180).stdout
        if name == "desktop":     # the page as a desktop reader has it: the math, image and widget checks
            dom, requests = probed, dict(server.log[start:])
        found = re.search(r'id="icl-probe" data-overflow="([^"]*)" data-code="([^"]*)" data-scales="([^"]*)" '
                          r'data-players="([^"]*)" data-height="(\d+)"', probed)
        if not found:
            layout_problems.append(f"{url_path}: the layout probe did not run at {name} width ({width} px)")
            continue
        tables, code, scales, players = (json.loads(found.group(k).replace("&quot;", '"')) for k in (1, 2, 3, 4))
        for i, over in tables:
            layout_problems.append(f"{url_path}: table {i} overflows its column by {over} px at {name} "
                                   f"width ({width} px)")
        for i, over in code:
            layout_problems.append(f"{url_path}: code block {i} overflows its box by {over} px at {name} "
                                   f"width ({width} px)")
        for i, (moved, changed, loaded) in enumerate(players):
            if not (moved and changed and loaded):
                layout_problems.append(f"{url_path}: explorer player {i} at {name} width: moving a control "
                                       f"{'changed' if changed else 'did not change'} the figure"
                                       f"{'' if loaded else ' (the new frame did not load)'}")
        if name == "desktop":
            height = min(int(found.group(5)) + 100, 60000)
            stats["scales"], stats["players"] = scales, len(players)
            small = [x for x in scales if x < MIN_SCALE]
            if small:
                layout_problems.append(f"{url_path}: {len(small)} figure(s) shown below {MIN_SCALE:.0%} of their "
                                       f"drawn width at desktop width (smallest {min(small):.0%}): tick labels "
                                       "become illegible")
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / (page.relative_to(HTML).with_suffix("").as_posix().replace("/", "__") + ".png")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000",
                        f"--window-size=1280,{height}", f"--screenshot={shot}", url],
                       capture_output=True, timeout=180)
    p = Page()
    p.feed(dom)
    text = "".join(p.text)
    problems = list(layout_problems)
    if not dom.strip():
        return [f"{url_path}: Chromium returned an empty DOM"]
    expected = source_math_blocks(page)
    if expected and p.mjx < expected:
        problems.append(f"{url_path}: {p.mjx} MathJax elements for {expected} display-math "
                        "blocks: math not typeset")
    if "$$" in text:
        problems.append(f"{url_path}: raw $$ left in the rendered text")
    for src in p.imgs:
        if src.startswith(("http:", "https:")):
            continue
        if src.startswith("data:"):
            continue
        target = (page.parent / src).resolve()
        req = "/" + target.relative_to(HTML.resolve()).as_posix()
        status = requests.get(req)
        if status != 200 or target.stat().st_size < 200:
            problems.append(f"{url_path}: image {src} not loaded (status {status})")
    page_html = page.read_text()
    if 'class="icl-player"' not in page_html and 'tag_explorer' in page_html:
        problems.append(f"{url_path}: an explorer cell without its static player (the build must set "
                        "ICL_BOOK_STATIC_PLAYER=1)")
    if "widget-view+json" in page_html:
        problems.append(f"{url_path}: a live widget view in the HTML (no kernel runs behind the page)")
    if not shot.exists() or shot.stat().st_size < 1000:
        problems.append(f"{url_path}: no screenshot")
    print(f"  {url_path:45s} math {p.mjx:3d}/{expected:<3d} images {len(p.imgs):2d}  "
          f"layout fits at {'/'.join(f'{w}' for w in WIDTHS.values())} px: {not layout_problems}  "
          f"figures >= {min(stats['scales'], default=1):.0%}  players {stats['players']}  "
          f"screenshot {shot.relative_to(ROOT)} ({height} px)")
    return problems


def main() -> int:
    if not (HTML / "index.html").exists():
        raise SystemExit("no _build/html/index.html: run `make book` first")
    exe = chromium()
    server = Server(HTML)
    problems = []
    try:
        for page in pages():
            problems += check_page(exe, server, page)
    finally:
        server.close()
    if problems:
        print("HTML check FAILED:\n  " + "\n  ".join(problems))
        return 1
    print(f"HTML check passed: {len(pages())} pages; screenshots in {SHOTS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
