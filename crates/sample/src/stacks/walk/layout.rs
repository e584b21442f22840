//! Where the walker finds what it reads, per CPython minor version: only the fields it reads, at
//! their byte offsets on 64-bit Linux (the layouts py-spy 0.4.3's generated bindings give for
//! 3.11.0, 3.12.0 and 3.13.0; CPython keeps them within a minor version).

/// How a thread state leads to its innermost frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FramePtr {
    /// 3.11, 3.12: `tstate->cframe` (a `_PyCFrame *`), then `cframe->current_frame`.
    ThroughCFrame { cframe: usize, current_frame: usize },
    /// 3.13: `tstate->current_frame`.
    Direct { current_frame: usize },
}

/// Where the GIL's holder is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GilAt {
    /// 3.11: py-spy's `threadstate_address` is `_PyRuntime.gilstate.tstate_current`, the holder's
    /// `PyThreadState *` (null when none holds it).
    TstateCurrent,
    /// 3.12, 3.13: it is the interpreter's `struct _gil_runtime_state`: `last_holder` is the
    /// holder while `locked` is non-zero.
    RuntimeState { last_holder: usize, locked: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub minor: u8,
    /// `PyInterpreterState.threads.head`.
    pub interp_threads_head: usize,
    /// `PyThreadState`: `next`, `native_thread_id`, and how far the walker reads of it.
    pub ts_next: usize,
    pub ts_native_thread_id: usize,
    pub ts_frame: FramePtr,
    pub ts_len: usize,
    /// `_PyInterpreterFrame`: `f_code` (3.13: `f_executable`), `previous`, `prev_instr`
    /// (3.13: `instr_ptr`), `owner`, and how far the walker reads of it.
    pub fr_code: usize,
    pub fr_previous: usize,
    pub fr_instr: usize,
    pub fr_owner: usize,
    pub fr_len: usize,
    /// `owner` of a frame the C stack owns (an entry shim), skipped; 3.11 has none.
    pub owner_cstack: Option<u8>,
    /// `PyCodeObject`: `co_firstlineno` (an int), `co_filename`, `co_name`, `co_qualname`,
    /// `co_linetable` (pointers), `co_code_adaptive` (where the instructions start), and how far
    /// the walker reads of its header.
    pub co_firstlineno: usize,
    pub co_filename: usize,
    pub co_name: usize,
    pub co_qualname: usize,
    pub co_linetable: usize,
    pub co_code_adaptive: usize,
    pub co_len: usize,
    /// 3.12+: `co_version` (a `uint32_t`), a number given to each code object as it is made.
    pub co_version: Option<usize>,
    /// `sizeof(PyASCIIObject)` and `sizeof(PyCompactUnicodeObject)`: where a compact string's
    /// characters start; `PyUnicodeObject.data.any` for a string that is not compact.
    pub str_ascii_size: usize,
    pub str_compact_size: usize,
    pub str_data_any: usize,
    pub gil: GilAt,
}

/// `PyObject.ob_type`.
pub(super) const OB_TYPE: usize = 8;
/// `PyASCIIObject.length` (a `Py_ssize_t`) and `.state` (a bitfield: `interned:2, kind:3,
/// compact:1, ascii:1`, from bit 0, the same in 3.11 to 3.13).
pub(super) const STR_LENGTH: usize = 16;
pub(super) const STR_STATE: usize = 32;
/// `PyBytesObject`: `ob_base.ob_size` and `ob_sval`.
pub(super) const BYTES_SIZE: usize = 16;
pub(super) const BYTES_DATA: usize = 32;

impl Layout {
    /// The layout of CPython 3.`minor`, where the walker reads that version.
    pub(super) fn of(major: u64, minor: u64) -> Option<Layout> {
        if major != 3 {
            return None;
        }
        match minor {
            11 => Some(Layout {
                minor: 11,
                interp_threads_head: 16,
                ts_next: 8,
                ts_native_thread_id: 160,
                ts_frame: FramePtr::ThroughCFrame { cframe: 56, current_frame: 8 },
                ts_len: 168,
                fr_code: 32,
                fr_previous: 48,
                fr_instr: 56,
                fr_owner: 69,
                fr_len: 72,
                owner_cstack: None,
                co_firstlineno: 72,
                co_filename: 112,
                co_name: 120,
                co_qualname: 128,
                co_linetable: 136,
                co_code_adaptive: 184,
                co_len: 144,
                co_version: None,
                str_ascii_size: 48,
                str_compact_size: 72,
                str_data_any: 72,
                gil: GilAt::TstateCurrent,
            }),
            12 => Some(Layout {
                minor: 12,
                interp_threads_head: 72,
                ts_next: 8,
                ts_native_thread_id: 144,
                ts_frame: FramePtr::ThroughCFrame { cframe: 56, current_frame: 0 },
                ts_len: 152,
                fr_code: 0,
                fr_previous: 8,
                fr_instr: 56,
                fr_owner: 70,
                fr_len: 72,
                owner_cstack: Some(3),
                co_firstlineno: 68,
                co_filename: 112,
                co_name: 120,
                co_qualname: 128,
                co_linetable: 136,
                co_code_adaptive: 192,
                co_len: 144,
                co_version: Some(92),
                str_ascii_size: 40,
                str_compact_size: 56,
                str_data_any: 56,
                gil: GilAt::RuntimeState { last_holder: 8, locked: 16 },
            }),
            13 => Some(Layout {
                minor: 13,
                interp_threads_head: 7344,
                ts_next: 8,
                ts_native_thread_id: 160,
                ts_frame: FramePtr::Direct { current_frame: 72 },
                ts_len: 168,
                fr_code: 0,
                fr_previous: 8,
                fr_instr: 56,
                fr_owner: 70,
                fr_len: 72,
                owner_cstack: Some(3),
                co_firstlineno: 68,
                co_filename: 112,
                co_name: 120,
                co_qualname: 128,
                co_linetable: 136,
                co_code_adaptive: 200,
                co_len: 144,
                co_version: Some(92),
                str_ascii_size: 40,
                str_compact_size: 56,
                str_data_any: 56,
                gil: GilAt::RuntimeState { last_holder: 8, locked: 16 },
            }),
            _ => None,
        }
    }
}
