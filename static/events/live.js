// Weft live channel for alarms and the dashboard: reconnecting websocket, typed messages.
(function () {
  "use strict";
  function connect(path, onMessage) {
    const badge = document.getElementById("live-status");
    let delay = 500;
    function open() {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      const ws = new WebSocket(`${scheme}://${location.host}${path}`);
      ws.onopen = () => { delay = 500; if (badge) { badge.textContent = "live"; badge.className = "badge live"; } };
      ws.onmessage = (ev) => { try { onMessage(JSON.parse(ev.data)); } catch (e) { console.error(e); } };
      ws.onclose = (ev) => {
        if (badge) { badge.textContent = "offline"; badge.className = "badge down"; }
        if (ev.code === 4401) { location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname); return; }
        if (ev.code === 4403) return;
        setTimeout(open, delay); delay = Math.min(delay * 2, 15000);
      };
    }
    open();
  }
  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  window.WeftLive = { connect, csrf };
})();
