// Live approvals: the nav badge on every page, and the inbox's cards, countdowns, shortcuts, claims,
// selection and desktop notifications. The websocket only says "request N of tenant T changed" (or who
// is looking at it); everything shown is re-read over HTTP from permission-checked views, and every
// (re)connect re-reads the whole pending list.
(() => {
  const script = document.currentScript;
  const countUrl = script && script.dataset.countUrl;
  const wsPath = (script && script.dataset.wsPath) || "/ws/approvals/";

  function ready(fn) {
    if (document.readyState !== "loading") fn(); else document.addEventListener("DOMContentLoaded", fn);
  }

  ready(() => {
    const badge = document.getElementById("pending-count");
    const list = document.getElementById("pending-list");
    const empty = document.getElementById("inbox-empty");
    const live = document.getElementById("live-status");
    if (!badge && !list) return;

    function refreshCount() {
      if (!badge || !countUrl) return;
      fetch(countUrl, { credentials: "same-origin" }).then((r) => (r.ok ? r.text() : null)).then((text) => {
        if (text === null) return;
        badge.dataset.count = text.trim();
        badge.textContent = text.trim() === "0" ? "" : text.trim();
        if (list) document.title = `${text.trim() === "0" ? "" : `(${text.trim()}) `}Approvals · Airlock`;
      });
    }

    // Desktop notifications: asked for only when the approver clicks the button, never on load.
    const notifyButton = document.getElementById("enable-notifications");
    const canNotify = () => "Notification" in window && Notification.permission === "granted";
    if (notifyButton && "Notification" in window && Notification.permission === "default") {
      notifyButton.hidden = false;
      notifyButton.addEventListener("click", () => {
        Notification.requestPermission().then(() => { notifyButton.hidden = true; });
      });
    }
    function announce(card) {
      if (!canNotify() || !card || !card.hasAttribute("data-routed")) return;
      const title = card.querySelector(".title");
      const note = new Notification("A request waits for you", {
        body: title ? title.textContent.trim() : "A new approval request", tag: `approval-${card.dataset.approvalId}`,
      });
      note.onclick = () => { window.focus(); card.focus(); };
    }

    function cards() { return list ? Array.from(list.querySelectorAll(".approval-card")) : []; }
    function syncEmpty() { if (empty) empty.hidden = cards().length > 0; }

    // A re-read list keeps the approver's place: the selected card, the ticked ones, the open groups,
    // what they have typed into a card and where the cursor is, as they are the moment the new list
    // replaces the old one. It is put back at once, in the same task as the swap (a key pressed between
    // the two would land on the page, not in the field), and the selection once more after htmx has settled:
    // settling gives each card that kept its id the attributes the server sent, which drops the "selected"
    // class. Each re-read carries its own copy on its request, as two re-reads can overlap.
    function fieldKey(field) {  // "#approval-7 .decline-form [name=reason]": the same field in the re-read list
      const holder = field.closest("[id]");
      const form = field.closest("form");
      if (!holder || holder === list || !field.name) return "";
      return `#${holder.id} ${form && form.classList.length ? `.${form.classList[0]} ` : ""}[name="${field.name}"]`;
    }
    function keepPlace() {
      const selected = list.querySelector(".approval-card.selected");
      const focused = list.contains(document.activeElement) ? fieldKey(document.activeElement) : "";
      return {
        selected: selected ? selected.id : "",
        ticked: Array.from(list.querySelectorAll("input.select-card:checked")).map((box) => box.value),
        open: Array.from(list.querySelectorAll(".approval-group details[open]")).map((d) => d.closest(".approval-group").id),
        typed: Array.from(list.querySelectorAll("input[type=text], input:not([type]), textarea"))
          .filter((field) => field.value !== field.defaultValue && fieldKey(field))
          .map((field) => [fieldKey(field), field.value]),
        focused,
        caret: focused && "selectionStart" in document.activeElement ? document.activeElement.selectionStart : null,
        // A decision's note stays for its few seconds although the decided card is no longer in the list.
        decided: Array.from(list.querySelectorAll("[data-decided]")).map((note) => (
          { note, after: note.previousElementSibling ? note.previousElementSibling.id : "" })),
      };
    }
    function restorePlace(kept) {
      if (!kept) return;
      const again = kept.selected && document.getElementById(kept.selected);
      if (again) again.classList.add("selected");
      kept.ticked.forEach((pk) => { const box = list.querySelector(`input.select-card[value="${pk}"]`); if (box) box.checked = true; });
      kept.open.forEach((id) => { const group = document.getElementById(id); if (group) group.querySelector("details").open = true; });
      kept.decided.forEach(({ note, after }) => {
        if (!note.dataset.gone && !note.isConnected && !document.getElementById(note.id)) {
          const before = after && document.getElementById(after);
          if (before && list.contains(before)) before.after(note); else list.prepend(note);
        }
      });
      kept.typed.forEach(([key, value]) => { const field = list.querySelector(key); if (field) field.value = value; });
      const focus = kept.focused && list.querySelector(kept.focused);
      if (focus) {
        focus.focus();
        if (kept.caret !== null && "setSelectionRange" in focus) focus.setSelectionRange(kept.caret, kept.caret);
      }
      syncSelection();
    }

    // The list is morphed (idiomorph), not replaced: a card that stays keeps its elements, so a click or a
    // key on it is not lost to a re-read; what the server cannot know (selection, ticks, typing) is put back.
    function refreshList() {
      if (!list || !window.htmx) return;
      htmx.ajax("GET", list.dataset.listUrl, { source: list, target: list, swap: "morph:innerHTML" }).then(syncEmpty);
    }

    function cardUrl(id) {
      const base = list.dataset.cardUrl.replace(/0\/card\/$/, `${id}/card/`);
      return list.dataset.query ? `${base}?${list.dataset.query}` : base;
    }

    function refreshCard(id) {
      if (!list || !window.htmx) return;
      const existing = document.getElementById(`approval-${id}`);
      // Our own decision note fades by itself; a card whose decision is in flight gets its answer
      // from that POST (re-fetching it now would remove it before the answer can be shown).
      if (existing && (existing.dataset.decided || existing.querySelector(".htmx-request"))) return;
      if (existing) {
        htmx.ajax("GET", cardUrl(id), { target: `#approval-${id}`, swap: "outerHTML" }).then(syncEmpty);
      } else {
        htmx.ajax("GET", cardUrl(id), { target: "#pending-list", swap: "afterbegin" }).then(() => {
          syncEmpty();
          announce(document.getElementById(`approval-${id}`));
        });
      }
    }

    // Claims: "alice is looking at this". The server checks each claim, keeps it until the page stops
    // renewing it or its socket closes, and tells every approver of the request.
    const me = list ? list.dataset.me : "";
    const claimSeconds = list ? Number(list.dataset.claimSeconds || 90) : 90;
    let socket = null;
    function send(message) { if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message)); }
    function showClaim(card, by, expiresAt) {
      const box = card && card.querySelector("[data-claim]");
      if (!box) return;
      box.dataset.claimedBy = by || "";
      box.dataset.claimExpires = expiresAt || "";
      const note = box.querySelector(".claim-note");
      note.textContent = "";
      if (by && by !== me) {
        const who = document.createElement("strong");
        who.textContent = by;
        note.append(who, " is looking at this");
      } else if (by) {
        note.textContent = "You are looking at this";
      }
      card.classList.toggle("claimed", Boolean(by) && by !== me);
      const button = box.querySelector("[data-claim-button]");
      if (button) {
        button.textContent = by === me ? "Release" : "I'm on it";
        button.hidden = Boolean(by) && by !== me;  // someone else holds it: nothing to claim until they let go
      }
    }
    // A list or card read over HTTP shows claims as they were when the server rendered it; a claim event that
    // came over the socket after the read was sent is newer, and is shown again over what the read brought.
    const liveClaims = new Map();
    document.body.addEventListener("htmx:beforeRequest", (event) => { event.detail.xhr.airlockSentAt = Date.now(); });
    function reapplyNewerClaims(sentAt) {
      liveClaims.forEach((claim, id) => {
        if (claim.at >= sentAt) showClaim(document.getElementById(`approval-${id}`), claim.by, claim.expiresAt);
      });
    }
    function myClaims() {
      return cards().filter((c) => { const box = c.querySelector("[data-claim]"); return box && box.dataset.claimedBy === me; });
    }
    if (list) {
      list.addEventListener("click", (event) => {
        const button = event.target.closest("[data-claim-button]");
        if (!button) return;
        const card = button.closest(".approval-card");
        const mine = card.querySelector("[data-claim]").dataset.claimedBy === me;
        send({ type: mine ? "release" : "claim", approval_id: Number(card.dataset.approvalId) });
      });
      setInterval(() => myClaims().forEach((c) => send({ type: "claim", approval_id: Number(c.dataset.approvalId) })),
        Math.max(5, claimSeconds / 3) * 1000);
      // Leaving the page lets go at once; the server also releases them when the socket closes.
      window.addEventListener("pagehide", () => myClaims().forEach((c) => send({ type: "release", approval_id: Number(c.dataset.approvalId) })));
    }

    // Selection: tick cards (or press x) and decide them together with one reason.
    const bulkForm = document.getElementById("bulk-form");
    function syncSelection() {
      if (!bulkForm) return;
      const ticked = document.querySelectorAll("input.select-card:checked").length;
      const counter = document.getElementById("selected-count");
      counter.dataset.selected = String(ticked);
      counter.textContent = ticked ? `${ticked} selected` : "Select cards to decide them together";
      bulkForm.querySelectorAll("button").forEach((b) => { b.disabled = ticked === 0; });
    }
    document.body.addEventListener("change", (event) => { if (event.target.matches("input.select-card")) syncSelection(); });

    let delay = 500;
    function connect() {
      const scheme = window.location.protocol === "https:" ? "wss" : "ws";
      socket = new WebSocket(`${scheme}://${window.location.host}${wsPath}`);
      socket.onopen = () => {
        delay = 500;
        if (live) { live.textContent = "live"; live.className = "pill ok"; }
        myClaims().forEach((c) => send({ type: "claim", approval_id: Number(c.dataset.approvalId) }));  // a new socket holds none
        refreshList();   // anything that changed while we were not listening
        refreshCount();
      };
      socket.onmessage = (message) => {
        const data = JSON.parse(message.data);
        if (data.type === "approval.claimed") {
          liveClaims.set(data.approval_id, { by: data.by, expiresAt: data.expires_at, at: Date.now() });
          showClaim(document.getElementById(`approval-${data.approval_id}`), data.by, data.expires_at);
          return;
        }
        if (data.type !== "approval.changed") return;
        refreshCount();
        refreshCard(data.approval_id);
      };
      socket.onclose = (event) => {
        // The server ends the socket when access ends: 4401 the session is gone, 4403 the role was lost.
        if (event.code === 4401) { window.location.reload(); return; }  // the login page takes over
        if (event.code === 4403) {
          if (live) { live.textContent = "not live: you no longer approve here"; live.className = "pill bad"; }
          return;
        }
        if (live) { live.textContent = "reconnecting…"; live.className = "pill warn"; }
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 15000);
      };
    }
    connect();

    // A refused decision (400 invalid, 403 not allowed, 409 already decided) still answers with the
    // card or note to show; htmx does not swap error responses unless told to.
    document.body.addEventListener("htmx:beforeSwap", (event) => {
      const target = event.detail.target;
      // A re-read list must not replace a card whose decision is in flight: the decision's answer would
      // land in a card no longer on the page. Read the list again once that answer is in.
      if (target && target.id === "pending-list" && target.querySelector(".htmx-request")) {
        event.detail.shouldSwap = false;
        setTimeout(refreshList, 300);
        return;
      }
      if (target && target.id === "pending-list") event.detail.xhr.airlockPlace = keepPlace();
      if ([400, 403, 409].includes(event.detail.xhr.status) && target && target.id && target.id.startsWith("approval-")) {
        event.detail.shouldSwap = true;
        event.detail.isError = false;
      }
    });

    document.body.addEventListener("htmx:afterSettle", (event) => {
      const kept = event.detail.target && event.detail.target.id === "pending-list" && event.detail.xhr.airlockPlace;
      const again = kept && kept.selected && document.getElementById(kept.selected);
      if (again) again.classList.add("selected");
    });

    document.body.addEventListener("htmx:afterSwap", (event) => {
      if (event.detail.target && event.detail.target.id === "pending-list") restorePlace(event.detail.xhr.airlockPlace);
      if (event.detail.xhr && event.detail.xhr.airlockSentAt) reapplyNewerClaims(event.detail.xhr.airlockSentAt);
      if (event.detail.target && event.detail.target.id === "bulk-result") {
        refreshList();  // the decided cards leave, the refused ones stay, with what became of each above
        if (bulkForm) bulkForm.reset();
      }
      syncSelection();
      syncEmpty();
      tick();
      document.querySelectorAll("[data-decided]").forEach((note) => {
        if (!note.dataset.fading) {
          note.dataset.fading = "1";
          setTimeout(() => { note.dataset.gone = "1"; note.remove(); syncEmpty(); }, 4000);
        }
      });
      refreshCount();
    });

    // Live expiry countdowns.
    function tick() {
      const now = Date.now();
      document.querySelectorAll("[data-claim-expires]").forEach((box) => {
        if (box.dataset.claimExpires && Date.parse(box.dataset.claimExpires) <= now) showClaim(box.closest(".approval-card"), "", "");
      });
      document.querySelectorAll("[data-expires-at]").forEach((el) => {
        const left = Math.round((Date.parse(el.dataset.expiresAt) - now) / 1000);
        if (left <= 0) { el.textContent = "expired"; el.classList.add("urgent"); return; }
        const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
        el.textContent = `expires in ${h ? `${h}h ` : ""}${m}m ${String(s).padStart(2, "0")}s`;
        el.classList.toggle("urgent", left < 120);
      });
    }
    tick();
    setInterval(tick, 1000);

    // Keyboard shortcuts: j/k move, o open, a approve, d decline (focuses the reason).
    if (!list) return;
    let index = -1;
    function select(i) {
      const all = cards();
      if (!all.length) return;
      index = Math.max(0, Math.min(i, all.length - 1));
      all.forEach((c, n) => c.classList.toggle("selected", n === index));
      const group = all[index].closest("details");
      if (group) group.open = true;
      all[index].scrollIntoView({ block: "nearest" });
    }
    document.addEventListener("keydown", (event) => {
      const tag = (event.target.tagName || "").toLowerCase();
      if (["input", "textarea", "select"].includes(tag) || event.metaKey || event.ctrlKey || event.altKey) return;
      const all = cards();
      const current = all.find((c) => c.classList.contains("selected")) || null;
      if (current) index = all.indexOf(current);
      if (event.key === "j") { select(index + 1); event.preventDefault(); }
      else if (event.key === "k") { select(index - 1); event.preventDefault(); }
      else if (event.key === "o" && current) { window.location = current.dataset.detailUrl; }
      else if (event.key === "a" && current) {
        const button = current.querySelector('button[data-action="approve"]');
        if (button && !button.disabled) button.click();
      } else if (event.key === "x" && current) {
        const box = current.querySelector("input.select-card");
        if (box) { box.checked = !box.checked; syncSelection(); }
      } else if (event.key === "d" && current) {
        const reason = current.querySelector('.decline-form input[name="reason"]');
        if (reason) { reason.focus(); event.preventDefault(); }
      }
    });
  });
})();
