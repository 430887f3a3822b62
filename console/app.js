// Placeholder: the console's pages replace this module.
document.querySelector('#app p').textContent = 'The console is not built yet; the API is at /api/v1.';
