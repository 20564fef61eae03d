//! The Books page: the list, upload (≤ 10 MB, with progress) and removal.
//!
//! Owns the upload endpoint: the file's text is extracted and cut into parts by
//! `memd_engine::ingest` (as `memd ingest` does) and stored through `Core::ingest`, the API's
//! own call; removal goes through `Core::remove_book`. Must never accept more than the ingest limit nor parse a file on an
//! async thread (PDF extraction is CPU work).

use super::layout::{self, csrf_field};
use super::{App, Checked, CheckedBytes, Viewer, answer, see_other};
use axum::extract::{Query, State};
use axum::response::Response;
use maud::html;
use memd_engine::error::ApiError;
use memd_engine::ingest::MAX_BYTES;
use serde::Deserialize;

pub async fn list(State(s): App, viewer: Viewer) -> Response {
    answer(s.core.books(), |books| {
        let body = html! {
            section aria-labelledby="upload-title" {
                h2 #upload-title { "Add a book" }
                form #upload data-max-bytes=(MAX_BYTES) {
                    div.field { label for="file" { "File (.txt, .md or .pdf, at most 10 MB)" }
                        input #file type="file" name="file" accept=".txt,.md,.markdown,.pdf" required; }
                    div.field { label for="title" { "Title (default: the file name)" }
                        input #title type="text" name="title" maxlength="200"; }
                    button type="submit" { "Upload" }
                    progress #upload-progress max="100" value="0" hidden {}
                    p #upload-status role="status" aria-live="polite" {}
                }
                noscript { p { "Uploading needs JavaScript; `memd ingest FILE` does the same from a terminal." } }
            }
            h2 { "Books" }
            @if books.books.is_empty() { p #no-books { "No book yet." } } @else {
                table #books {
                    thead { tr { th scope="col" { "Title" } th scope="col" { "Chunks" } th scope="col" { "Added" }
                        th scope="col" { "Project" } th scope="col" { span.visually-hidden { "Actions" } } } }
                    tbody { @for b in &books.books { tr {
                        td.book-title { (b.title) }
                        td { (b.chunks) }
                        td { (b.created_at.get(..10).unwrap_or("")) }
                        td { (b.project.as_deref().unwrap_or("global")) }
                        td { form.inline.danger method="post" action="/ui/books/remove"
                                data-confirm=(format!("Remove the book \u{201c}{}\u{201d}?", b.title)) {
                            (csrf_field(&viewer))
                            input type="hidden" name="title" value=(b.title);
                            button type="submit" aria-label=(format!("Remove {}", b.title)) { "Remove" }
                        } }
                    } } }
                }
            }
        };
        layout::page("Books", "/ui/books", &viewer, body)
    })
}

#[derive(Deserialize)]
pub struct UploadParams {
    #[serde(default)]
    name: String,
    #[serde(default)]
    title: String,
}

/// `POST /ui/books/upload?name=FILE&title=TITLE` with the file as the body; answers JSON (the
/// page's script shows progress and the result).
pub async fn upload(
    State(s): App,
    Query(p): Query<UploadParams>,
    CheckedBytes(_, bytes): CheckedBytes<MAX_BYTES>,
) -> Response {
    let name = p.name.clone();
    let extracted =
        tokio::task::spawn_blocking(move || memd_engine::confine::extract_text(&name, &bytes))
            .await;
    let text = match extracted {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => {
            return crate::body::error_response(&ApiError::unprocessable("file", e.to_string()));
        }
        Err(_) => return crate::body::error_response(&ApiError::internal("extraction failed")),
    };
    let title = match p.title.trim() {
        "" => std::path::Path::new(&p.name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.name.clone()),
        t => t.to_string(),
    };
    // In the parts `memd ingest` sends, so a file stored both ways is stored once.
    let mut total = proto::IngestResponse {
        success: true,
        title: title.clone(),
        ..Default::default()
    };
    for part in memd_engine::ingest::split_parts(&text, memd_engine::ingest::PART_BYTES) {
        let req = proto::IngestRequest {
            title: title.clone(),
            content: part.to_string(),
            source: Some(format!("dashboard upload: {}", p.name)),
            scope: None,
            cwd: None,
        };
        match s.core.ingest(&req).await {
            Ok(r) => {
                total.title = r.title;
                total.chunks += r.chunks;
                total.already_present += r.already_present;
            }
            Err(e) => return crate::body::error_response(&e),
        }
    }
    crate::body::json_response(200, &total)
}

#[derive(Deserialize)]
pub struct RemoveForm {
    title: String,
}

pub async fn remove(State(s): App, Checked(_, f): Checked<RemoveForm>) -> Response {
    let req = proto::RemoveBookRequest { title: f.title };
    answer(s.core.remove_book(&req).await, |_| see_other("/ui/books"))
}
