// memd dashboard: the little that needs a script. Every page works without it except the
// upload (which needs to show progress); forms post normally.
"use strict";

// Forms marked data-confirm ask before they post (delete, remove).
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

// Book upload: the file goes as the request body, the CSRF token as a header; progress shown.
function setUpUpload() {
  const form = document.getElementById("upload");
  if (!form) return;
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const maxBytes = Number(form.dataset.maxBytes);
  const progress = document.getElementById("upload-progress");
  const status = document.getElementById("upload-status");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const file = document.getElementById("file").files[0];
    if (!file) return;
    if (file.size > maxBytes) {
      status.textContent = `${file.name} is ${(file.size / 1048576).toFixed(1)} MB; books are limited to ${maxBytes / 1048576} MB.`;
      return;
    }
    const title = document.getElementById("title").value;
    const query = new URLSearchParams({ name: file.name, title });
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `/ui/books/upload?${query}`);
    xhr.setRequestHeader("x-memd-csrf", csrf);
    xhr.setRequestHeader("content-type", "application/octet-stream");
    progress.hidden = false;
    progress.value = 0;
    status.textContent = `Uploading ${file.name}…`;
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) progress.value = Math.round((e.loaded / e.total) * 100);
    };
    xhr.upload.onload = () => {
      status.textContent = `Storing ${file.name} (extracting text, embedding chunks)…`;
    };
    xhr.onload = () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (_) { /* shown as a status below */ }
      if (xhr.status === 200) {
        status.textContent = `Stored “${body.title}”: ${body.chunks} chunks (${body.already_present} already present).`;
        window.location.reload();
      } else {
        progress.hidden = true;
        status.textContent = `Not stored: ${body.error || `HTTP ${xhr.status}`}`;
      }
    };
    xhr.onerror = () => {
      progress.hidden = true;
      status.textContent = "Not stored: the daemon did not answer.";
    };
    xhr.send(file);
  });
}

document.addEventListener("DOMContentLoaded", setUpUpload);
