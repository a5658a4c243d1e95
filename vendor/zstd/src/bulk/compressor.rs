use crate::map_error_code;

use std::io;
use zstd_safe;

/// Allows to compress independently multiple chunks of data.
///
/// Each job will be processed entirely in-memory without streaming, so this
/// is most fitting for many small jobs. To compress larger volume that don't
/// easily fit in memory, a streaming compression may be more appropriate.
///
/// It is more efficient than a streaming compressor for 2 reasons:
/// * It re-uses the zstd context between jobs to avoid re-allocations
/// * It avoids copying data from a `Read` into a temporary buffer before compression.
#[derive(Default)]
pub struct Compressor<'a> {
    // neve patch: a compressor with nothing but a level owns no context; each call borrows
    // one from the thread's pool (see `pool`). The parquet crate makes a compressor for every
    // column chunk it reads or writes, and creating a zstd compression context runs CPUID,
    // which traps to the hypervisor on virtual machines (about 10 µs a context). A context of
    // its own is created only for a dictionary, a parameter or `context_mut`.
    context: Option<zstd_safe::CCtx<'a>>,
    // The level to set when the context is created; `None` (a default or prepared-dictionary
    // compressor) sets none, as upstream does.
    level: Option<i32>,
}

impl Compressor<'static> {
    /// Creates a new zstd compressor
    pub fn new(level: i32) -> io::Result<Self> {
        Self::with_dictionary(level, &[])
    }

    /// Creates a new zstd compressor, using the given dictionary.
    ///
    /// Note that using a dictionary means that decompression will need to use
    /// the same dictionary.
    pub fn with_dictionary(level: i32, dictionary: &[u8]) -> io::Result<Self> {
        let mut compressor = Self {
            context: None,
            level: Some(level),
        };

        compressor.set_dictionary(level, dictionary)?;

        Ok(compressor)
    }
}

impl<'a> Compressor<'a> {
    /// Creates a new compressor using an existing `EncoderDictionary`.
    ///
    /// The compression level will be the one specified when creating the dictionary.
    ///
    /// Note that using a dictionary means that decompression will need to use
    /// the same dictionary.
    pub fn with_prepared_dictionary<'b>(
        dictionary: &'a crate::dict::EncoderDictionary<'b>,
    ) -> io::Result<Self>
    where
        'b: 'a,
    {
        let mut compressor = Self::default();

        compressor.set_prepared_dictionary(dictionary)?;

        Ok(compressor)
    }

    /// Changes the compression level used by this compressor.
    ///
    /// *This will clear any dictionary previously registered.*
    ///
    /// If you want to keep the existing dictionary, you will need to pass it again to
    /// `Self::set_dictionary` instead of using this method.
    pub fn set_compression_level(&mut self, level: i32) -> io::Result<()> {
        self.set_dictionary(level, &[])
    }

    /// Changes the dictionary and compression level used by this compressor.
    ///
    /// Will affect future compression jobs.
    ///
    /// Note that using a dictionary means that decompression will need to use
    /// the same dictionary.
    pub fn set_dictionary(
        &mut self,
        level: i32,
        dictionary: &[u8],
    ) -> io::Result<()> {
        self.level = Some(level);
        if self.context.is_none() && dictionary.is_empty() {
            // Applied when the context is created.
            return Ok(());
        }
        let context = self.context()?;
        context
            .set_parameter(zstd_safe::CParameter::CompressionLevel(level))
            .map_err(map_error_code)?;

        context
            .load_dictionary(dictionary)
            .map_err(map_error_code)?;

        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn has_context(&self) -> bool {
        self.context.is_some()
    }

    /// The compressor's own context, created (with the pending level) when first needed.
    fn context(&mut self) -> io::Result<&mut zstd_safe::CCtx<'a>> {
        if self.context.is_none() {
            let mut context =
                zstd_safe::CCtx::try_create().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        "cannot create a zstd compression context",
                    )
                })?;
            if let Some(level) = self.level {
                context
                    .set_parameter(zstd_safe::CParameter::CompressionLevel(
                        level,
                    ))
                    .map_err(map_error_code)?;
            }
            self.context = Some(context);
        }
        Ok(self.context.as_mut().expect("created above"))
    }

    /// Changes the dictionary used by this compressor.
    ///
    /// The compression level used when preparing the dictionary will be used.
    ///
    /// Note that using a dictionary means that decompression will need to use
    /// the same dictionary.
    pub fn set_prepared_dictionary<'b>(
        &mut self,
        dictionary: &'a crate::dict::EncoderDictionary<'b>,
    ) -> io::Result<()>
    where
        'b: 'a,
    {
        self.context()?
            .ref_cdict(dictionary.as_cdict())
            .map_err(map_error_code)?;

        Ok(())
    }

    /// Compress a single block of data to the given destination buffer.
    ///
    /// Returns the number of bytes written, or an error if something happened
    /// (for instance if the destination buffer was too small).
    ///
    /// A level of `0` uses zstd's default (currently `3`).
    pub fn compress_to_buffer<C: zstd_safe::WriteBuf + ?Sized>(
        &mut self,
        source: &[u8],
        destination: &mut C,
    ) -> io::Result<usize> {
        match &mut self.context {
            Some(context) => {
                context.compress2(destination, source).map_err(map_error_code)
            }
            None => super::pool::with_compression(self.level, |context| {
                context.compress2(destination, source).map_err(map_error_code)
            }),
        }
    }

    /// Compresses a block of data and returns the compressed result.
    ///
    /// A level of `0` uses zstd's default (currently `3`).
    pub fn compress(&mut self, data: &[u8]) -> io::Result<Vec<u8>> {
        // We allocate a big buffer, slightly larger than the input data.
        let buffer_len = zstd_safe::compress_bound(data.len());
        let mut buffer = Vec::with_capacity(buffer_len);

        self.compress_to_buffer(data, &mut buffer)?;

        // Should we shrink the vec? Meh, let the user do it if he wants.
        Ok(buffer)
    }

    /// Gives mutable access to the internal context.
    pub fn context_mut(&mut self) -> &mut zstd_safe::CCtx<'a> {
        self.context()
            .expect("a zstd compression context with a valid level")
    }

    /// Sets a compression parameter for this compressor.
    pub fn set_parameter(
        &mut self,
        parameter: zstd_safe::CParameter,
    ) -> io::Result<()> {
        self.context()?
            .set_parameter(parameter)
            .map_err(map_error_code)?;
        Ok(())
    }

    /// Sets the expected size of the input.
    ///
    /// This affects the compression effectiveness.
    ///
    /// It is an error to give an incorrect size (an error will be returned when closing the
    /// stream if the size does not match what was pledged).
    ///
    /// Giving a `None` size means the size is unknown (this is the default).
    pub fn set_pledged_src_size(
        &mut self,
        size: Option<u64>,
    ) -> io::Result<()> {
        self.context()?
            .set_pledged_src_size(size)
            .map_err(map_error_code)?;
        Ok(())
    }

    crate::encoder_parameters!();
}

fn _assert_traits() {
    fn _assert_send<T: Send>(_: T) {}

    _assert_send(Compressor::new(0));
}
