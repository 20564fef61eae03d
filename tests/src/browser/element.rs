//! One element of the page a [`Browser`] shows: clicks, keys, text, attributes, finding within.
//!
//! Owns the element commands of the WebDriver protocol. Must never outlive its browser (it
//! borrows it) nor hide which selector failed: every error names it.

use super::{Browser, ELEMENT_KEY, by_css, string};
use serde_json::{Value, json};

/// An element of the current page, found by `selector` (kept for error messages).
pub struct Element<'a> {
    pub(super) browser: &'a Browser,
    pub(super) id: String,
    pub(super) selector: String,
}

impl<'a> Element<'a> {
    fn cmd(
        &self,
        method: &str,
        what: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        self.browser
            .cmd(method, &format!("/element/{}{path}", self.id), body)
            .map_err(|e| format!("{what} {:?}: {e}", self.selector))
    }

    /// The selector this element was found by.
    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// The element as a script argument for [`Browser::execute`].
    pub fn to_json(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }

    pub fn click(&self) -> Result<(), String> {
        self.cmd("POST", "click", "/click", None).map(drop)
    }

    /// Types `text` into the element (focusing it first); [`key`] codes press special keys.
    pub fn send_keys(&self, text: &str) -> Result<(), String> {
        self.cmd("POST", "type into", "/value", Some(json!({"text": text})))
            .map(drop)
    }

    /// Empties an input or textarea.
    pub fn clear(&self) -> Result<(), String> {
        self.cmd("POST", "clear", "/clear", None).map(drop)
    }

    /// The rendered text (what is visible, as `innerText`).
    pub fn text(&self) -> Result<String, String> {
        string(self.cmd("GET", "text of", "/text", None)?, "text")
    }

    /// The HTML attribute `name` (None: absent).
    pub fn attr(&self, name: &str) -> Result<Option<String>, String> {
        match self.cmd(
            "GET",
            &format!("attribute {name} of"),
            &format!("/attribute/{name}"),
            None,
        )? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Ok(Some(other.to_string())),
        }
    }

    /// The DOM property `name` (e.g. an input's live `value`, `checked`); null when unset.
    pub fn property(&self, name: &str) -> Result<Value, String> {
        self.cmd(
            "GET",
            &format!("property {name} of"),
            &format!("/property/{name}"),
            None,
        )
    }

    pub fn is_displayed(&self) -> Result<bool, String> {
        let v = self.cmd("GET", "is displayed", "/displayed", None)?;
        v.as_bool()
            .ok_or_else(|| format!("is {:?} displayed: not a bool: {v}", self.selector))
    }

    /// The first descendant matching `css`; an error if there is none.
    pub fn find(&self, css: &str) -> Result<Element<'a>, String> {
        let v = self.cmd(
            "POST",
            &format!("find {css:?} in"),
            "/element",
            Some(by_css(css)),
        )?;
        self.browser.element(&v, format!("{} {css}", self.selector))
    }

    /// Every descendant matching `css`.
    pub fn find_all(&self, css: &str) -> Result<Vec<Element<'a>>, String> {
        let v = self.cmd(
            "POST",
            &format!("find all {css:?} in"),
            "/elements",
            Some(by_css(css)),
        )?;
        self.browser
            .elements(&v, &format!("{} {css}", self.selector))
    }
}
