//! The Windows counterpart of mode 0600 for the token: a DACL with one entry, full access for
//! the current user, protected from inheriting its parent's entries. Owns setting that DACL on a
//! file and checking a file has exactly it; must never widen an ACL or touch any other file.

use std::io;
use std::os::windows::ffi::OsStrExt;
use std::path::Path;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, LocalFree};
use windows_sys::Win32::Security::Authorization::{
    GetNamedSecurityInfoW, SE_FILE_OBJECT, SetNamedSecurityInfoW,
};
use windows_sys::Win32::Security::{
    ACCESS_ALLOWED_ACE, ACL, ACL_REVISION, AddAccessAllowedAce, DACL_SECURITY_INFORMATION,
    EqualSid, GetAce, GetLengthSid, GetSecurityDescriptorControl, GetTokenInformation,
    InitializeAcl, PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, SE_DACL_PROTECTED,
    TOKEN_QUERY, TOKEN_USER, TokenUser,
};
use windows_sys::Win32::Storage::FileSystem::FILE_ALL_ACCESS;
use windows_sys::Win32::System::SystemServices::ACCESS_ALLOWED_ACE_TYPE;
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain([0]).collect()
}

/// The current user's `TOKEN_USER`, in a buffer kept alive with the SID it points into.
struct CurrentUser(Vec<u64>);

impl CurrentUser {
    fn get() -> io::Result<CurrentUser> {
        let mut token: HANDLE = std::ptr::null_mut();
        // SAFETY: the pseudo-handle of this process; `token` receives a handle we close below.
        if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
            return Err(io::Error::last_os_error());
        }
        let mut len = 0u32;
        // SAFETY: a size query with no buffer; it fails with the needed length in `len`.
        unsafe { GetTokenInformation(token, TokenUser, std::ptr::null_mut(), 0, &mut len) };
        // u64 elements keep the buffer aligned for TOKEN_USER.
        let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
        // SAFETY: `buf` holds at least `len` bytes.
        let ok = unsafe {
            GetTokenInformation(token, TokenUser, buf.as_mut_ptr().cast(), len, &mut len)
        };
        let err = io::Error::last_os_error();
        // SAFETY: `token` came from OpenProcessToken above.
        unsafe { CloseHandle(token) };
        if ok == 0 {
            return Err(err);
        }
        Ok(CurrentUser(buf))
    }

    fn sid(&self) -> *mut core::ffi::c_void {
        // SAFETY: GetTokenInformation(TokenUser) filled the buffer with a TOKEN_USER.
        unsafe { (*(self.0.as_ptr() as *const TOKEN_USER)).User.Sid }
    }
}

/// Replaces `path`'s DACL with one entry, full access for the current user, and stops it from
/// inheriting entries from its directory.
pub fn restrict_to_owner(path: &Path) -> io::Result<()> {
    let user = CurrentUser::get()?;
    // SAFETY: the SID comes from the live TOKEN_USER buffer.
    let sid_len = unsafe { GetLengthSid(user.sid()) };
    let acl_len = size_of::<ACL>() + size_of::<ACCESS_ALLOWED_ACE>() + sid_len as usize;
    let mut acl_buf = vec![0u64; acl_len.div_ceil(8)];
    let acl = acl_buf.as_mut_ptr() as *mut ACL;
    // SAFETY: `acl_buf` is `acl_len` bytes, aligned, and outlives every use of `acl`.
    unsafe {
        if InitializeAcl(acl, acl_len as u32, ACL_REVISION) == 0
            || AddAccessAllowedAce(acl, ACL_REVISION, FILE_ALL_ACCESS, user.sid()) == 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    let name = wide(path);
    let info = DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION;
    // SAFETY: `name` is NUL-terminated; owner, group and SACL are left as they are (null).
    let rc = unsafe {
        SetNamedSecurityInfoW(
            name.as_ptr(),
            SE_FILE_OBJECT,
            info,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            acl,
            std::ptr::null(),
        )
    };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e as i32)),
    }
}

/// Whether `path`'s DACL is exactly what [`restrict_to_owner`] sets: protected, one
/// access-allowed entry, for the current user.
pub fn is_owner_only(path: &Path) -> io::Result<bool> {
    let user = CurrentUser::get()?;
    let name = wide(path);
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: `name` is NUL-terminated; `sd` receives a LocalAlloc'd block freed below, into
    // which `dacl` points.
    let rc = unsafe {
        GetNamedSecurityInfoW(
            name.as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    // SAFETY: `sd` and `dacl` are valid until LocalFree; a null DACL grants everyone.
    let verdict = unsafe {
        let mut control = 0u16;
        let mut revision = 0u32;
        let protected = GetSecurityDescriptorControl(sd, &mut control, &mut revision) != 0
            && control & SE_DACL_PROTECTED != 0;
        let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
        let only_user = !dacl.is_null()
            && (*dacl).AceCount == 1
            && GetAce(dacl, 0, &mut ace) != 0
            && u32::from((*(ace as *const ACCESS_ALLOWED_ACE)).Header.AceType)
                == ACCESS_ALLOWED_ACE_TYPE
            && EqualSid(
                std::ptr::addr_of_mut!((*(ace as *mut ACCESS_ALLOWED_ACE)).SidStart).cast(),
                user.sid(),
            ) != 0;
        LocalFree(sd);
        protected && only_user
    };
    Ok(verdict)
}
