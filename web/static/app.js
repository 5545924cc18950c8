// Loupe's page script. Pages work without it; it only adds live updates and shortcuts.
// It is loaded as a module with the page's CSP nonce; it never uses eval or inline handlers.
document.documentElement.dataset.js = "on";
