// meshmail webmail: a small JMAP client (RFC 8620/8621) in plain
// JavaScript. Message content is only ever put into the page as text
// (textContent), never as HTML: an HTML-only message is reduced to its
// text by an inert DOMParser document, whose scripts never run.
"use strict";

const CAPS = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail", "urn:ietf:params:jmap:submission"];
const LIST_PROPS = ["subject", "from", "receivedAt", "keywords", "preview", "mailboxIds"];
const $ = (id) => document.getElementById(id);

const app = {
  auth: null, session: null, account: null, mailboxes: [], current: null,
  open: null, replyTo: null, push: null,
};

function status(text) { $("status").textContent = text; }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function jmap(calls) {
  const r = await fetch(app.session.apiUrl, {
    method: "POST",
    headers: { "Authorization": app.auth, "Content-Type": "application/json" },
    body: JSON.stringify({ using: CAPS, methodCalls: calls }),
  });
  if (!r.ok) throw new Error("JMAP request failed: " + r.status);
  const body = await r.json();
  for (const [name, args] of body.methodResponses) {
    if (name === "error") throw new Error("JMAP error: " + args.type + (args.description ? " (" + args.description + ")" : ""));
  }
  return body.methodResponses;
}

async function login(ev) {
  ev.preventDefault();
  $("login-error").textContent = "";
  const user = $("user").value.trim();
  const auth = "Basic " + btoa(unescape(encodeURIComponent(user + ":" + $("password").value)));
  try {
    const r = await fetch("/.well-known/jmap", { headers: { "Authorization": auth } });
    if (!r.ok) {
      const p = await r.json().catch(() => ({}));
      throw new Error(p.detail || ("sign-in failed (" + r.status + ")"));
    }
    app.session = await r.json();
    app.auth = auth;
    app.account = app.session.primaryAccounts["urn:ietf:params:jmap:mail"];
    $("password").value = "";
    $("who").textContent = app.session.username;
    $("login-view").hidden = true;
    $("mail-view").hidden = false;
    $("logout-button").hidden = false;
    await refreshMailboxes();
    const inbox = app.mailboxes.find((m) => m.role === "inbox") || app.mailboxes[0];
    await selectMailbox(inbox.id);
    startPush();
  } catch (e) {
    $("login-error").textContent = e.message;
  }
}

function logout() {
  if (app.push) app.push.abort();
  location.reload();
}

async function refreshMailboxes() {
  const [[, res]] = await jmap([["Mailbox/get", { accountId: app.account, properties: ["name", "role", "unreadEmails", "totalEmails", "parentId"] }, "m"]]);
  const order = ["inbox", "drafts", "sent", "archive", "junk", "trash"];
  app.mailboxes = res.list.sort((a, b) => {
    const ra = order.indexOf(a.role), rb = order.indexOf(b.role);
    return (ra < 0 ? 99 : ra) - (rb < 0 ? 99 : rb) || a.name.localeCompare(b.name);
  });
  const ul = $("mailboxes");
  ul.replaceChildren();
  const move = $("move-select");
  move.replaceChildren(el("option", "", "Move to…"));
  move.firstChild.value = "";
  for (const m of app.mailboxes) {
    const li = el("li");
    li.dataset.id = m.id;
    if (m.role) li.dataset.role = m.role;
    if (m.id === app.current) li.classList.add("selected");
    li.append(el("span", "name", m.name));
    if (m.unreadEmails > 0) li.append(el("span", "count", String(m.unreadEmails)));
    li.addEventListener("click", () => selectMailbox(m.id));
    ul.append(li);
    const o = el("option", "", m.name);
    o.value = m.id;
    move.append(o);
  }
}

async function selectMailbox(id) {
  app.current = id;
  for (const li of $("mailboxes").children) li.classList.toggle("selected", li.dataset.id === id);
  $("reader").hidden = true;
  await refreshMessages();
}

async function refreshMessages() {
  const res = await jmap([
    ["Email/query", { accountId: app.account, filter: { inMailbox: app.current }, sort: [{ property: "receivedAt", isAscending: false }], limit: 50 }, "q"],
    ["Email/get", { accountId: app.account, "#ids": { resultOf: "q", name: "Email/query", path: "/ids" }, properties: LIST_PROPS }, "g"],
  ]);
  const list = res[1][1].list;
  const ul = $("messages");
  ul.replaceChildren();
  $("empty").hidden = list.length > 0;
  for (const m of list) {
    const li = el("li", "message");
    li.dataset.id = m.id;
    if (!m.keywords["$seen"]) li.classList.add("unread");
    if (m.id === (app.open && app.open.id)) li.classList.add("selected");
    const from = (m.from && m.from[0]) ? (m.from[0].name || m.from[0].email) : "";
    const top = el("div", "from");
    top.append(el("span", "", from));
    const when = el("span", "");
    when.textContent = (m.keywords["$flagged"] ? "⚑ " : "") + new Date(m.receivedAt).toLocaleString();
    if (m.keywords["$flagged"]) when.classList.add("flag");
    top.append(when);
    li.append(top, el("div", "subject", m.subject || "(no subject)"), el("div", "preview", m.preview || ""));
    li.addEventListener("click", () => openMessage(m.id));
    ul.append(li);
  }
}

// Text of an HTML body, computed in an inert document (no scripts run,
// nothing loads); only the text reaches the page.
function htmlToText(html) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  for (const bad of doc.querySelectorAll("script, style, head")) bad.remove();
  return (doc.body ? doc.body.innerText || doc.body.textContent : "") || "";
}

async function openMessage(id) {
  const [[, res]] = await jmap([["Email/get", {
    accountId: app.account, ids: [id],
    properties: ["subject", "from", "to", "cc", "receivedAt", "keywords", "messageId", "references", "textBody", "htmlBody", "attachments", "bodyValues", "mailboxIds"],
    fetchTextBodyValues: true, fetchHTMLBodyValues: true, maxBodyValueBytes: 262144,
  }, "r"]]);
  const m = res.list[0];
  if (!m) return;
  app.open = m;
  for (const li of $("messages").children) li.classList.toggle("selected", li.dataset.id === id);
  $("composer").hidden = true;
  $("reader").hidden = false;
  $("reader-subject").textContent = m.subject || "(no subject)";
  const who = (list) => (list || []).map((a) => a.name ? a.name + " <" + a.email + ">" : a.email).join(", ");
  $("reader-meta").textContent = "From " + who(m.from) + " to " + who(m.to) + " — " + new Date(m.receivedAt).toLocaleString();
  let text = (m.textBody || []).map((p) => (m.bodyValues[p.partId] || {}).value || "").join("\n");
  const textIsHtml = (m.textBody || []).every((p) => p.type === "text/html");
  if (!text.trim() || textIsHtml) {
    text = (m.htmlBody || []).map((p) => {
      const v = (m.bodyValues[p.partId] || {}).value || "";
      return p.type === "text/html" ? htmlToText(v) : v;
    }).join("\n");
  }
  $("reader-body").textContent = text;
  $("flag-button").textContent = m.keywords["$flagged"] ? "Unflag" : "Flag";
  const atts = $("reader-attachments");
  atts.replaceChildren();
  for (const a of m.attachments || []) {
    const li = el("li");
    const b = el("button", "attachment", "⬇ " + (a.name || "attachment") + " (" + a.size + " bytes)");
    b.addEventListener("click", () => download(a));
    li.append(b);
    atts.append(li);
  }
  if (!m.keywords["$seen"]) {
    await jmap([["Email/set", { accountId: app.account, update: { [id]: { "keywords/$seen": true } } }, "s"]]);
  }
}

async function download(part) {
  const url = app.session.downloadUrl
    .replace("{accountId}", encodeURIComponent(app.account))
    .replace("{blobId}", encodeURIComponent(part.blobId))
    .replace("{name}", encodeURIComponent(part.name || "attachment"))
    .replace("{type}", encodeURIComponent("application/octet-stream"));
  const r = await fetch(url, { headers: { "Authorization": app.auth } });
  if (!r.ok) { status("download failed: " + r.status); return; }
  const link = el("a");
  link.href = URL.createObjectURL(await r.blob());
  link.download = part.name || "attachment";
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

function compose(reply) {
  app.replyTo = reply || null;
  $("reader").hidden = true;
  $("composer").hidden = false;
  $("compose-title").textContent = reply ? "Reply" : "New message";
  $("to").value = reply && reply.from && reply.from[0] ? reply.from[0].email : "";
  const s = reply ? (reply.subject || "") : "";
  $("subject").value = reply ? (/^re:/i.test(s) ? s : "Re: " + s) : "";
  $("body").value = reply ? "\n\n> " + $("reader-body").textContent.split("\n").join("\n> ") : "";
  $("attachment").value = "";
  (reply ? $("body") : $("to")).focus();
}

async function upload(file) {
  const url = app.session.uploadUrl.replace("{accountId}", encodeURIComponent(app.account));
  const r = await fetch(url, {
    method: "POST",
    headers: { "Authorization": app.auth, "Content-Type": file.type || "application/octet-stream" },
    body: file,
  });
  if (!r.ok) throw new Error("upload failed: " + r.status);
  return r.json();
}

async function send(ev) {
  ev.preventDefault();
  $("send-button").disabled = true;
  try {
    const sent = app.mailboxes.find((m) => m.role === "sent") || app.mailboxes[0];
    const to = $("to").value.split(",").map((s) => s.trim()).filter(Boolean).map((email) => ({ email }));
    const email = {
      mailboxIds: { [sent.id]: true },
      keywords: { "$seen": true },
      from: [{ email: app.session.username }],
      to,
      subject: $("subject").value,
      textBody: [{ partId: "body", type: "text/plain" }],
      bodyValues: { body: { value: $("body").value } },
    };
    const r = app.replyTo;
    if (r && r.messageId) {
      email.inReplyTo = r.messageId;
      email.references = (r.references || []).concat(r.messageId);
    }
    const file = $("attachment").files[0];
    if (file) {
      const up = await upload(file);
      email.attachments = [{ blobId: up.blobId, type: up.type, name: file.name, disposition: "attachment" }];
    }
    const calls = [
      ["Email/set", { accountId: app.account, create: { draft: email } }, "c"],
      ["EmailSubmission/set", { accountId: app.account, create: { send: { identityId: "i0", emailId: "#draft" } } }, "s"],
    ];
    if (r) calls.push(["Email/set", { accountId: app.account, update: { [r.id]: { "keywords/$answered": true } } }, "a"]);
    const res = await jmap(calls);
    const created = res[0][1].created, notCreated = res[0][1].notCreated;
    if (!created || !created.draft) throw new Error("not saved: " + JSON.stringify(notCreated));
    const sub = res[1][1];
    if (!sub.created || !sub.created.send) throw new Error("not sent: " + JSON.stringify(sub.notCreated));
    status("Sent to " + to.map((t) => t.email).join(", "));
    $("composer").hidden = true;
    app.replyTo = null;
  } catch (e) {
    status(e.message);
  } finally {
    $("send-button").disabled = false;
  }
}

async function toggleFlag() {
  const m = app.open;
  if (!m) return;
  const on = !m.keywords["$flagged"];
  await jmap([["Email/set", { accountId: app.account, update: { [m.id]: { "keywords/$flagged": on || null } } }, "f"]]);
  m.keywords["$flagged"] = on;
  $("flag-button").textContent = on ? "Unflag" : "Flag";
}

async function moveTo(target) {
  const m = app.open;
  if (!m || !target) return;
  await jmap([["Email/set", { accountId: app.account, update: { [m.id]: { mailboxIds: { [target]: true } } } }, "mv"]]);
  app.open = null;
  $("reader").hidden = true;
  $("move-select").value = "";
}

async function remove() {
  const m = app.open;
  if (!m) return;
  const trash = app.mailboxes.find((x) => x.role === "trash");
  if (trash && !m.mailboxIds[trash.id]) {
    await moveTo(trash.id);
  } else {
    await jmap([["Email/set", { accountId: app.account, destroy: [m.id] }, "d"]]);
    app.open = null;
    $("reader").hidden = true;
  }
}

// Live updates: the EventSource stream (text/event-stream) read with
// fetch, which can send the Authorization header (an EventSource object
// cannot). Reconnects with a growing delay.
async function startPush() {
  const url = app.session.eventSourceUrl.replace("{types}", "*").replace("{closeafter}", "no").replace("{ping}", "30");
  let delay = 1000;
  for (;;) {
    app.push = new AbortController();
    try {
      const r = await fetch(url, { headers: { "Authorization": app.auth }, signal: app.push.signal });
      if (!r.ok) throw new Error("push: " + r.status);
      $("live").textContent = "live";
      $("live").classList.add("on");
      delay = 1000;
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (/^event: state$/m.test(event)) await onStateChange();
        }
      }
    } catch (e) {
      if (app.push.signal.aborted) return;
    }
    $("live").textContent = "offline";
    $("live").classList.remove("on");
    await new Promise((res) => setTimeout(res, delay));
    delay = Math.min(delay * 2, 30000);
  }
}

let refreshing = null;
async function onStateChange() {
  // Changes arriving during a refresh are covered by one more refresh.
  if (refreshing) { refreshing.again = true; return; }
  refreshing = { again: false };
  try {
    do {
      refreshing.again = false;
      await refreshMailboxes();
      await refreshMessages();
    } while (refreshing.again);
  } catch (e) {
    status(e.message);
  } finally {
    refreshing = null;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", login);
  $("logout-button").addEventListener("click", logout);
  $("compose-button").addEventListener("click", () => compose(null));
  $("reply-button").addEventListener("click", () => compose(app.open));
  $("cancel-button").addEventListener("click", () => { $("composer").hidden = true; });
  $("compose-form").addEventListener("submit", send);
  $("flag-button").addEventListener("click", () => toggleFlag().catch((e) => status(e.message)));
  $("delete-button").addEventListener("click", () => remove().catch((e) => status(e.message)));
  $("move-select").addEventListener("change", (e) => moveTo(e.target.value).catch((err) => status(err.message)));
});
